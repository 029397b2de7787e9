//! Client properties from the operator: a properties file (Kafka's tools'
//! `--command-config client.properties`), the environment, and single
//! `KEY=VALUE` overrides (kcat's `-X`), merged into the properties every
//! client of the process is made with ([`LiveConfig::properties`]).
//!
//! Later sources win, key by key: the file, then the environment's
//! `PARSLEY_CLIENT_*` variables, then `-X`. The file is `--command-config`,
//! or `PARSLEY_COMMAND_CONFIG` when the flag is not given.
//!
//! The file is a Java properties file, as Kafka's tools read: `key=value`,
//! `key: value` or `key value` lines, `#` and `!` comments, a trailing `\`
//! continuing a line, and the escapes `\t`, `\n`, `\r`, `\f`, `\uXXXX` and
//! `\` before any other character. The Java clients' `sasl.jaas.config`
//! for the `PLAIN` and `SCRAM` login modules is read into librdkafka's
//! `sasl.username` and `sasl.password`, so one file serves Kafka's tools and
//! the runner; Java-only properties librdkafka has no equivalent for (a JKS
//! trust store, say) are refused by name when a client is made.
//!
//! The values of secret properties ([`is_secret`]) are never shown:
//! [`LiveConfig`]'s `Debug`, every error, and the logs show `[redacted]`.
//!
//! [`LiveConfig`]: super::LiveConfig
//! [`LiveConfig::properties`]: super::LiveConfig::properties

use std::fmt;
use std::path::{Path, PathBuf};

/// The environment variable naming a client properties file, as
/// `--command-config` does.
pub const COMMAND_CONFIG_ENV: &str = "PARSLEY_COMMAND_CONFIG";

/// The prefix of the environment variables that set one client property
/// each: `PARSLEY_CLIENT_SASL_PASSWORD=…` sets `sasl.password` (the rest of
/// the name lower-cased, `_` read as `.`).
pub const CLIENT_ENV_PREFIX: &str = "PARSLEY_CLIENT_";

/// What a secret's value is shown as.
pub const REDACTED: &str = "[redacted]";

/// Properties whose names hold a secret-looking word but whose values are
/// not secrets: file locations, URLs, types, ids and public certificates.
/// Only these exact names (lower-cased) escape [`is_secret`]'s rule; a
/// misspelling of one of them is redacted like any unknown key.
const NOT_SECRET: &[&str] = &[
    "https.ca.pem",
    "oauthbearer_token_refresh_cb",
    "sasl.kerberos.keytab",
    "sasl.oauthbearer.assertion.private.key.file",
    "sasl.oauthbearer.client.credentials.client.id",
    "sasl.oauthbearer.token.endpoint.url",
    "ssl.ca.pem",
    "ssl.certificate.pem",
    "ssl.key.location",
    "ssl.keystore.location",
    "ssl.keystore.type",
    "ssl.keystore.certificate.chain",
    "ssl.keymanager.algorithm",
    "ssl.truststore.location",
    "ssl.truststore.type",
    "ssl.truststore.certificates",
];

/// Secret-looking words and how many edits (insertions, deletions,
/// substitutions, transpositions of neighbours) a word of a key may be
/// from holding one of them as a substring.
const SECRET_WORDS: &[(&str, usize)] = &[
    ("password", 2),
    ("passwd", 1),
    ("passphrase", 2),
    ("credential", 2),
    ("secret", 1),
    ("token", 1),
    ("jaas", 0),
    ("key", 0),
    ("pem", 0),
    ("private", 0),
];

/// True for a property whose value is a secret, or may be: the rule is
/// deliberately loose, because a key misspelt by the operator is still
/// the operator's secret (`sasl.passwrd`, `sasl.pasword`,
/// `PARSLEY_CLIENT_SASL_PASSWROD`, `sasl.secrt`).
///
/// The key is lower-cased and cut into words at every character that is
/// not a letter or digit; it is a secret when one of its words holds
/// `password`, `passphrase` or `credential` with at most two edits,
/// `passwd`, `secret` or `token` with at most one, or `jaas`, `key`, `pem`
/// or `private` as they are
/// (an edit: a character inserted, deleted, replaced, or two neighbours
/// swapped), or when a word is `pw`, `pwd` or `pass`; and it is not one of
/// the exact names of `NOT_SECRET` (a location, a URL, a type, a public
/// certificate). So `ssl.key.password`, `ssl.key.pem`, `ssl_key`,
/// `sasl.jaas.config`, `sasl.oauthbearer.client.secret` are secrets, and
/// `ssl.key.location` and `sasl.oauthbearer.token.endpoint.url` are not.
/// `sasl.oauthbearer.config` (which may hold a secret) is one by name.
pub fn is_secret(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    if NOT_SECRET.contains(&key.as_str()) {
        return false;
    }
    if key == "sasl.oauthbearer.config" {
        return true;
    }
    key.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|word| !word.is_empty())
        .any(|word| {
            matches!(word, "pw" | "pwd" | "pass")
                || SECRET_WORDS
                    .iter()
                    .any(|(secret, edits)| edits_to_substring(secret, word) <= *edits)
        })
}

/// The fewest edits (insertion, deletion, substitution, transposition of
/// neighbours) that turn some substring of `text` into `pattern`: Sellers'
/// approximate substring match over the optimal-string-alignment distance.
fn edits_to_substring(pattern: &str, text: &str) -> usize {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    // rows[i][j]: edits between p[..i] and the best substring ending at t[..j].
    let mut rows = vec![vec![0usize; t.len() + 1]; p.len() + 1];
    for (i, row) in rows.iter_mut().enumerate() {
        row[0] = i;
    }
    for i in 1..=p.len() {
        for j in 1..=t.len() {
            let cost = usize::from(p[i - 1] != t[j - 1]);
            let mut best = (rows[i - 1][j] + 1)
                .min(rows[i][j - 1] + 1)
                .min(rows[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && p[i - 1] == t[j - 2] && p[i - 2] == t[j - 1] {
                best = best.min(rows[i - 2][j - 2] + 1);
            }
            rows[i][j] = best;
        }
    }
    rows[p.len()].iter().copied().min().unwrap_or(p.len())
}

/// `value`, or [`REDACTED`] when `key` names a secret.
pub fn shown<'a>(key: &str, value: &'a str) -> &'a str {
    if is_secret(key) {
        REDACTED
    } else {
        value
    }
}

/// Where a property came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// A line of a properties file.
    File {
        /// The file.
        path: PathBuf,
        /// Its line, from 1 (the first line of a continued one).
        line: usize,
    },
    /// An environment variable.
    Env {
        /// Its name.
        name: String,
    },
    /// A `-X KEY=VALUE` of the command line.
    Flag,
    /// Set in code ([`LiveConfig::with_property`](super::LiveConfig::with_property)).
    Code,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::File { path, line } => write!(f, "{}:{line}", path.display()),
            Origin::Env { name } => write!(f, "environment variable {name}"),
            Origin::Flag => f.write_str("-X"),
            Origin::Code => f.write_str("the application's code"),
        }
    }
}

/// A client property with where it came from.
#[derive(Clone, PartialEq, Eq)]
pub struct Property {
    /// librdkafka's name for it.
    pub key: String,
    /// Its value.
    pub value: String,
    /// Where it was given.
    pub origin: Origin,
}

impl fmt::Debug for Property {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}={} ({})",
            self.key,
            shown(&self.key, &self.value),
            self.origin
        )
    }
}

/// Why client properties could not be read. No variant holds a secret's
/// value.
#[derive(Debug, thiserror::Error)]
pub enum PropertiesError {
    /// The file could not be read.
    #[error("cannot read the client properties file {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A line is not `key=value`.
    #[error("{origin}: {why}")]
    Syntax {
        /// The file and line, or the variable or flag.
        origin: Origin,
        /// What is wrong, without the value.
        why: String,
    },
    /// `sasl.jaas.config` names a login module or options librdkafka cannot
    /// take.
    #[error("{origin}: sasl.jaas.config: {why}")]
    Jaas {
        /// Where it was given.
        origin: Origin,
        /// What is wrong, without the value.
        why: String,
    },
    /// librdkafka refused a property: an unknown name or a bad value. Its
    /// value is never shown, secret or not: a misspelt secret's key is
    /// unknown, and its value is still the secret.
    #[error("{origin}: client property `{key}` refused (its value is not shown): {why}")]
    Refused {
        /// The property.
        key: String,
        /// Where it was given.
        origin: Origin,
        /// librdkafka's reason, with the property's value and every
        /// secret's value removed ([`redact_refused`]).
        why: String,
    },
}

/// librdkafka's reason for refusing `value` of a property, with that value
/// (quoted, as librdkafka quotes it, or as it is when it is long enough
/// not to be mistaken for other text) and every secret value of
/// `properties` replaced by [`REDACTED`].
pub fn redact_refused<'a>(
    why: &str,
    value: &str,
    properties: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> String {
    let mut text = why.to_string();
    if !value.is_empty() {
        text = text.replace(&format!("\"{value}\""), &format!("\"{REDACTED}\""));
        if value.chars().count() >= 3 {
            text = text.replace(value, REDACTED);
        }
    }
    redact(&text, properties)
}

/// Reads the properties file at `path`.
pub fn read_file(path: &Path) -> Result<Vec<Property>, PropertiesError> {
    let text = std::fs::read_to_string(path).map_err(|source| PropertiesError::Io {
        path: path.to_owned(),
        source,
    })?;
    parse(&text, path)
}

/// Parses the text of a Java properties file read from `path` (which only
/// names where each property came from).
pub fn parse(text: &str, path: &Path) -> Result<Vec<Property>, PropertiesError> {
    let mut properties = Vec::new();
    let mut lines = text.lines().enumerate().peekable();
    while let Some((index, first)) = lines.next() {
        let origin = Origin::File {
            path: path.to_owned(),
            line: index + 1,
        };
        let trimmed = first.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with('!') {
            continue;
        }
        // A logical line: continued while a line ends in an odd number of
        // backslashes; a continuation's leading white space is dropped.
        let mut logical = trimmed.to_string();
        while ends_in_odd_backslashes(&logical) {
            logical.pop();
            match lines.next() {
                Some((_, next)) => logical.push_str(next.trim_start()),
                None => break,
            }
        }
        let (key, value) = split_key_value(&logical);
        let key = unescape(key).map_err(|why| PropertiesError::Syntax {
            origin: origin.clone(),
            why: format!("the key: {why}"),
        })?;
        let value = unescape(value).map_err(|why| PropertiesError::Syntax {
            origin: origin.clone(),
            why: format!("the value of `{key}`: {why}"),
        })?;
        if key.is_empty() {
            return Err(PropertiesError::Syntax {
                origin,
                why: "a line with a value but no key".into(),
            });
        }
        properties.push(Property { key, value, origin });
    }
    Ok(properties)
}

fn ends_in_odd_backslashes(text: &str) -> bool {
    text.chars().rev().take_while(|c| *c == '\\').count() % 2 == 1
}

/// The key ends at the first unescaped `=`, `:` or white space; white
/// space around the separator is skipped.
fn split_key_value(line: &str) -> (&str, &str) {
    let mut escaped = false;
    for (at, c) in line.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match c {
            '\\' => escaped = true,
            '=' | ':' => return (&line[..at], line[at + 1..].trim_start()),
            c if c.is_whitespace() => {
                let rest = line[at..].trim_start();
                let rest = rest
                    .strip_prefix('=')
                    .or_else(|| rest.strip_prefix(':'))
                    .unwrap_or(rest);
                return (&line[..at], rest.trim_start());
            }
            _ => {}
        }
    }
    (line, "")
}

fn unescape(text: &str) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\u{c}'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                let code = u32::from_str_radix(&hex, 16)
                    .ok()
                    .filter(|_| hex.len() == 4)
                    .and_then(char::from_u32)
                    .ok_or_else(|| "a \\u escape needs four hex digits".to_string())?;
                out.push(code);
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    Ok(out)
}

/// The `PARSLEY_CLIENT_*` variables of `vars`, as properties, sorted by
/// name so the result does not depend on the environment's order.
pub fn from_env_vars(vars: impl IntoIterator<Item = (String, String)>) -> Vec<Property> {
    let mut found: Vec<Property> = vars
        .into_iter()
        .filter_map(|(name, value)| {
            let rest = name.strip_prefix(CLIENT_ENV_PREFIX)?;
            if rest.is_empty() {
                return None;
            }
            let key = rest.to_ascii_lowercase().replace('_', ".");
            Some(Property {
                key,
                value,
                origin: Origin::Env { name },
            })
        })
        .collect();
    found.sort_by(|a, b| a.key.cmp(&b.key));
    found
}

/// A `-X KEY=VALUE` flag as a property.
pub fn from_flag(text: &str) -> Result<Property, String> {
    match text.split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => Ok(Property {
            key: key.trim().to_string(),
            value: value.to_string(),
            origin: Origin::Flag,
        }),
        // The text may hold a secret: only its key, if any, is named.
        _ => Err("expected KEY=VALUE, e.g. -X security.protocol=sasl_ssl".to_string()),
    }
}

/// `-X`'s parser for the command line: never fails, because the command
/// line's parser would quote the refused text, which may be a secret
/// (`-X sasl.password:hunter2`). A text that is not `KEY=VALUE` becomes a
/// property with an empty key that [`gather`] refuses without showing it.
pub fn flag_arg(text: &str) -> Result<Property, String> {
    Ok(from_flag(text).unwrap_or_else(|_| Property {
        key: String::new(),
        value: text.to_string(),
        origin: Origin::Flag,
    }))
}

/// The operator's properties: `file` (else `PARSLEY_COMMAND_CONFIG`'s), the
/// environment's `PARSLEY_CLIENT_*`, then `flags`, later ones winning;
/// `sasl.jaas.config` read into librdkafka's properties ([module
/// docs](self)).
pub fn gather(file: Option<&Path>, flags: &[Property]) -> Result<Vec<Property>, PropertiesError> {
    let env_file = std::env::var_os(COMMAND_CONFIG_ENV)
        .filter(|path| !path.is_empty())
        .map(PathBuf::from);
    let mut all = match file.map(Path::to_owned).or(env_file) {
        Some(path) => read_file(&path)?,
        None => Vec::new(),
    };
    all.extend(from_env_vars(std::env::vars()));
    if flags.iter().any(|flag| flag.key.is_empty()) {
        return Err(PropertiesError::Syntax {
            origin: Origin::Flag,
            why: "expected KEY=VALUE, e.g. -X security.protocol=sasl_ssl (the text given is not \
                  shown: it may be a secret)"
                .into(),
        });
    }
    all.extend(flags.iter().cloned());
    translate_java(all)
}

/// `properties` with the Java clients' names read as librdkafka's, each
/// given where the Java property was (so a later explicit librdkafka
/// property still wins):
///
/// - `sasl.jaas.config` (PLAIN or SCRAM login module) as `sasl.username`
///   and `sasl.password`;
/// - a PEM trust store (`ssl.truststore.type=PEM`) as `ssl.ca.location`
///   (`ssl.truststore.location`) or `ssl.ca.pem`
///   (`ssl.truststore.certificates`); its password is dropped (a PEM trust
///   store has none);
/// - a PEM key store (`ssl.keystore.type=PEM`): `ssl.keystore.location`, one
///   file with the private key and its certificate chain, as both
///   `ssl.key.location` and `ssl.certificate.location` (librdkafka reads
///   the key and the chain out of the same file); `ssl.keystore.key` and
///   `ssl.keystore.certificate.chain` as `ssl.key.pem` and
///   `ssl.certificate.pem`; `ssl.key.password` decrypts the key in both
///   clients; a `ssl.keystore.password` is dropped, as Java ignores it
///   for PEM;
/// - a PKCS12 key store (`ssl.keystore.type=PKCS12`) as it is: librdkafka's
///   `ssl.keystore.location` is PKCS#12;
/// - an empty `ssl.endpoint.identification.algorithm` (the Java clients'
///   way to turn the host name check off) as librdkafka's `none`.
///
/// A JKS trust or key store is refused by name: librdkafka reads PEM (and
/// PKCS#12 for the key store).
pub fn translate_java(properties: Vec<Property>) -> Result<Vec<Property>, PropertiesError> {
    let last_of = |key: &str| {
        properties
            .iter()
            .rev()
            .find(|property| property.key == key)
            .map(|property| property.value.to_ascii_uppercase())
    };
    let trust_type = last_of("ssl.truststore.type");
    let key_type = last_of("ssl.keystore.type");
    let renamed = |property: &Property, key: &str| Property {
        key: key.into(),
        value: property.value.clone(),
        origin: property.origin.clone(),
    };
    let mut out = Vec::with_capacity(properties.len());
    for property in properties {
        match property.key.as_str() {
            "ssl.truststore.type" | "ssl.keystore.type" => {}
            "ssl.truststore.location" | "ssl.truststore.certificates" => {
                if trust_type.as_deref() != Some("PEM") {
                    return Err(PropertiesError::Syntax {
                        origin: property.origin,
                        why: format!(
                            "{} of type {}: librdkafka reads a CA as PEM; give \
                             ssl.truststore.type=PEM with a PEM file, or ssl.ca.location",
                            property.key,
                            trust_type.as_deref().unwrap_or("JKS (the default)")
                        ),
                    });
                }
                let key = if property.key == "ssl.truststore.location" {
                    "ssl.ca.location"
                } else {
                    "ssl.ca.pem"
                };
                out.push(renamed(&property, key));
            }
            // A PEM trust store has no password.
            "ssl.truststore.password" => {}
            "ssl.keystore.location" => match key_type.as_deref() {
                Some("PEM") => {
                    out.push(renamed(&property, "ssl.key.location"));
                    out.push(renamed(&property, "ssl.certificate.location"));
                }
                Some("PKCS12") => out.push(property),
                other => {
                    return Err(PropertiesError::Syntax {
                        origin: property.origin,
                        why: format!(
                            "ssl.keystore.location of type {}: librdkafka reads a client key \
                             store as PEM or PKCS12; give ssl.keystore.type=PEM (or PKCS12) \
                             with such a file, or ssl.key.location and ssl.certificate.location",
                            other.unwrap_or("JKS (the default)")
                        ),
                    })
                }
            },
            "ssl.keystore.key" => out.push(renamed(&property, "ssl.key.pem")),
            "ssl.keystore.certificate.chain" => out.push(renamed(&property, "ssl.certificate.pem")),
            // Java ignores a PEM key store's password: the key's is
            // ssl.key.password.
            "ssl.keystore.password" if key_type.as_deref() == Some("PEM") => {}
            "ssl.endpoint.identification.algorithm" if property.value.trim().is_empty() => out
                .push(Property {
                    value: "none".into(),
                    ..property
                }),
            "sasl.jaas.config" => {
                let (username, password) =
                    jaas_credentials(&property.value).map_err(|why| PropertiesError::Jaas {
                        origin: property.origin.clone(),
                        why,
                    })?;
                for (key, value) in [("sasl.username", username), ("sasl.password", password)] {
                    out.push(Property {
                        key: key.into(),
                        value,
                        origin: property.origin.clone(),
                    });
                }
            }
            _ => out.push(property),
        }
    }
    Ok(out)
}

/// `properties`' `bootstrap.servers`, taken out: the runner reaches the
/// cluster at `--bootstrap` when given, else at the properties' (a Java
/// client's file names it), else at `KAFKA_BOOTSTRAP_SERVERS`; every client
/// then uses that one address list.
pub fn take_bootstrap(properties: &mut Vec<Property>) -> Option<Property> {
    let found = properties
        .iter()
        .rev()
        .find(|property| property.key == "bootstrap.servers")
        .cloned();
    properties.retain(|property| property.key != "bootstrap.servers");
    found
}

/// The `username` and `password` options of a JAAS configuration for
/// Kafka's `PlainLoginModule` or `ScramLoginModule`. The error never holds
/// the configuration's text.
fn jaas_credentials(jaas: &str) -> Result<(String, String), String> {
    let text = jaas.trim();
    let (module, rest) = text.split_once(char::is_whitespace).ok_or_else(|| {
        "expected `<LoginModule> required username=\"…\" password=\"…\";`".to_string()
    })?;
    let known = [
        "org.apache.kafka.common.security.plain.PlainLoginModule",
        "org.apache.kafka.common.security.scram.ScramLoginModule",
    ];
    if !known.contains(&module) {
        return Err(format!(
            "login module `{module}` has no librdkafka equivalent here: use PlainLoginModule or \
             ScramLoginModule, or set sasl.username and sasl.password (or librdkafka's own \
             sasl.* properties) instead"
        ));
    }
    let rest = rest.trim_start();
    let rest = rest
        .strip_prefix("required")
        .or_else(|| rest.strip_prefix("requisite"))
        .or_else(|| rest.strip_prefix("sufficient"))
        .or_else(|| rest.strip_prefix("optional"))
        .ok_or_else(|| format!("expected a control flag (`required`) after `{module}`"))?;
    let (mut username, mut password) = (None, None);
    let mut rest = rest.trim_start();
    while !rest.is_empty() && !rest.starts_with(';') {
        let (name, after) = rest
            .split_once('=')
            .ok_or_else(|| "an option is not name=\"value\"".to_string())?;
        let name = name.trim();
        // A malformed configuration may put secret text where a name is
        // expected: only a plain identifier is ever quoted back.
        let shown_name = if !name.is_empty()
            && name.len() <= 32
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
        {
            name
        } else {
            "(not shown)"
        };
        let after = after.trim_start();
        let (value, next) = if let Some(quoted) = after.strip_prefix('"') {
            let end = quoted.find('"').ok_or_else(|| {
                format!("option `{shown_name}`: the quoted value has no closing quote")
            })?;
            (&quoted[..end], &quoted[end + 1..])
        } else {
            let end = after
                .find(|c: char| c.is_whitespace() || c == ';')
                .unwrap_or(after.len());
            (&after[..end], &after[end..])
        };
        match name {
            "username" => username = Some(value.to_string()),
            "password" => password = Some(value.to_string()),
            _ => {}
        }
        rest = next.trim_start();
    }
    match (username, password) {
        (Some(username), Some(password)) => Ok((username, password)),
        (None, _) => Err(format!("no username option for `{module}`")),
        (_, None) => Err(format!("no password option for `{module}`")),
    }
}

/// `text` with every secret value of `properties` replaced by
/// [`REDACTED`]: for messages that may quote a value (librdkafka's).
pub fn redact<'a>(text: &str, properties: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let mut text = text.to_string();
    for (key, value) in properties {
        if is_secret(key) && !value.is_empty() {
            text = text.replace(value, REDACTED);
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(properties: &[Property]) -> Vec<(&str, &str)> {
        properties
            .iter()
            .map(|p| (p.key.as_str(), p.value.as_str()))
            .collect()
    }

    /// Java's properties syntax, as Kafka's tools read `--command-config`.
    #[test]
    fn a_properties_file_reads_as_javas() {
        let text = "# a comment\n! another\n\nsecurity.protocol=SASL_SSL\n  sasl.mechanism : SCRAM-SHA-512\n\
                    ssl.ca.location /etc/ca.pem\nsasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule \\\n   \
                    required username=\"alice\" \\\n   password=\"s3cr=t\";\nempty=\nescaped\\=key=a\\tb\\u0041\n";
        let parsed = parse(text, Path::new("client.properties")).unwrap();
        assert_eq!(
            pairs(&parsed),
            [
                ("security.protocol", "SASL_SSL"),
                ("sasl.mechanism", "SCRAM-SHA-512"),
                ("ssl.ca.location", "/etc/ca.pem"),
                (
                    "sasl.jaas.config",
                    "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"alice\" password=\"s3cr=t\";"
                ),
                ("empty", ""),
                ("escaped=key", "a\tbA"),
            ]
        );
        assert_eq!(
            parsed[3].origin,
            Origin::File {
                path: "client.properties".into(),
                line: 7
            }
        );
        let translated = translate_java(parsed).unwrap();
        assert_eq!(
            pairs(&translated)[3..5],
            [("sasl.username", "alice"), ("sasl.password", "s3cr=t")]
        );
        let store = parse(
            "ssl.truststore.type=PEM\nssl.truststore.location=/ca.pem\n",
            Path::new("c"),
        )
        .unwrap();
        assert_eq!(
            pairs(&translate_java(store).unwrap()),
            [("ssl.ca.location", "/ca.pem")]
        );
        let jks = parse("ssl.truststore.location=/ts.jks\n", Path::new("c")).unwrap();
        let error = translate_java(jks).unwrap_err().to_string();
        assert!(error.contains("c:1") && error.contains("PEM"), "{error}");
    }

    /// A Java client's file as it is: a PEM key store (a file, or the key
    /// and chain inline), the empty host name check, bootstrap.servers.
    #[test]
    fn java_pem_key_stores_and_the_empty_host_check_are_read_as_librdkafkas() {
        let text = "bootstrap.servers=b1:9093,b2:9093\nssl.keystore.type=PEM\n\
                    ssl.keystore.location=/etc/client.pem\nssl.key.password=k3y-pw\n\
                    ssl.keystore.password=ignored\nssl.endpoint.identification.algorithm=\n";
        let mut translated = translate_java(parse(text, Path::new("c")).unwrap()).unwrap();
        let bootstrap = take_bootstrap(&mut translated).unwrap();
        assert_eq!(bootstrap.value, "b1:9093,b2:9093");
        assert_eq!(
            pairs(&translated),
            [
                ("ssl.key.location", "/etc/client.pem"),
                ("ssl.certificate.location", "/etc/client.pem"),
                ("ssl.key.password", "k3y-pw"),
                ("ssl.endpoint.identification.algorithm", "none"),
            ]
        );
        let inline = "ssl.keystore.type=PEM\nssl.keystore.key=-----BEGIN PRIVATE KEY-----\n\
                      ssl.keystore.certificate.chain=-----BEGIN CERTIFICATE-----\n\
                      ssl.truststore.type=PEM\nssl.truststore.certificates=-----BEGIN CERTIFICATE-----\n";
        let translated = translate_java(parse(inline, Path::new("c")).unwrap()).unwrap();
        assert_eq!(
            translated
                .iter()
                .map(|p| p.key.as_str())
                .collect::<Vec<_>>(),
            ["ssl.key.pem", "ssl.certificate.pem", "ssl.ca.pem"]
        );
        let pkcs12 = "ssl.keystore.type=PKCS12\nssl.keystore.location=/k.p12\n";
        let translated = translate_java(parse(pkcs12, Path::new("c")).unwrap()).unwrap();
        assert_eq!(pairs(&translated), [("ssl.keystore.location", "/k.p12")]);
        let jks = "ssl.keystore.location=/k.jks\n";
        let error = translate_java(parse(jks, Path::new("c")).unwrap())
            .unwrap_err()
            .to_string();
        assert!(error.contains("c:1") && error.contains("JKS"), "{error}");
    }

    #[test]
    fn bad_lines_and_jaas_are_named_without_their_secret() {
        let error = parse("=value\n", Path::new("c.properties")).unwrap_err();
        assert_eq!(
            error.to_string(),
            "c.properties:1: a line with a value but no key"
        );
        let error = parse("a=\\u00g1\n", Path::new("c.properties")).unwrap_err();
        assert!(error.to_string().contains("c.properties:1"), "{error}");
        let kerberos = Property {
            key: "sasl.jaas.config".into(),
            value: "com.sun.security.auth.module.Krb5LoginModule required keyTab=\"hunter2\";"
                .into(),
            origin: Origin::Flag,
        };
        let error = translate_java(vec![kerberos]).unwrap_err().to_string();
        assert!(error.contains("Krb5LoginModule"), "{error}");
        assert!(!error.contains("hunter2"), "{error}");
        let no_password = Property {
            key: "sasl.jaas.config".into(),
            value:
                "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"a\";"
                    .into(),
            origin: Origin::Flag,
        };
        let error = translate_java(vec![no_password]).unwrap_err().to_string();
        assert!(error.contains("no password option"), "{error}");
        // A stray secret where an option's name belongs is not quoted.
        let malformed = Property {
            key: "sasl.jaas.config".into(),
            value: "org.apache.kafka.common.security.scram.ScramLoginModule required \
                    username=\"a\" hunter2 password=\"x"
                .into(),
            origin: Origin::Flag,
        };
        let error = translate_java(vec![malformed]).unwrap_err().to_string();
        assert!(
            !error.contains("hunter2") && error.contains("no closing quote"),
            "{error}"
        );
    }

    #[test]
    fn the_environment_and_flags_name_properties() {
        let found = from_env_vars([
            ("PARSLEY_CLIENT_SECURITY_PROTOCOL".into(), "sasl_ssl".into()),
            ("PARSLEY_CLIENT_SASL_PASSWORD".into(), "pw".into()),
            ("PARSLEY_CLIENT_".into(), "ignored".into()),
            ("PARSLEY_LOG".into(), "info".into()),
        ]);
        assert_eq!(
            pairs(&found),
            [("sasl.password", "pw"), ("security.protocol", "sasl_ssl")]
        );
        assert_eq!(
            from_flag("sasl.mechanism=PLAIN").unwrap().key,
            "sasl.mechanism"
        );
        let error = from_flag("hunter2").unwrap_err();
        assert!(!error.contains("hunter2"), "{error}");
    }

    /// Every secret property of librdkafka 2.12 and of the Java clients is
    /// a secret, and so is any misspelling of a secret word an operator
    /// may type; no property that names a file, a URL, a type or a public
    /// certificate is.
    #[test]
    fn misspelt_secret_keys_are_secrets_and_locations_are_not() {
        for key in [
            "sasl.password",
            "sasl.jaas.config",
            "sasl.oauthbearer.config",
            "sasl.oauthbearer.client.secret",
            "sasl.oauthbearer.client.credentials.client.secret",
            "sasl.oauthbearer.assertion.private.key.passphrase",
            "sasl.oauthbearer.assertion.private.key.pem",
            "ssl.key.password",
            "ssl.key.pem",
            "ssl_key",
            "ssl.keystore.password",
            "ssl.keystore.key",
            "ssl.truststore.password",
            // Misspelt, in any case, from any source.
            "sasl.passwrd",
            "sasl.pasword",
            "SASL.PASSWROD",
            "sasl.passwrod",
            "sasl.paswd",
            "sasl.pwd",
            "sasl.pssword",
            "saslpasswrd",
            "sasl.secrt",
            "sasl.oauthbearer.client.scret",
            "ssl.key.pasword",
            "sasl.jaas.confg",
            "sasl.tokn",
            "ssl.kee.pem",
            "my.api.key",
        ] {
            assert!(is_secret(key), "{key} is a secret");
            assert_eq!(shown(key, "hunter2"), REDACTED, "{key}");
        }
        for key in [
            "security.protocol",
            "sasl.username",
            "sasl.mechanism",
            "sasl.mechanisms",
            "bootstrap.servers",
            "client.id",
            "ssl.ca.location",
            "ssl.ca.pem",
            "ssl.certificate.location",
            "ssl.certificate.pem",
            "ssl.key.location",
            "ssl.keystore.location",
            "ssl.keystore.type",
            "ssl.endpoint.identification.algorithm",
            "enable.ssl.certificate.verification",
            "sasl.kerberos.keytab",
            "sasl.oauthbearer.token.endpoint.url",
            "sasl.oauthbearer.client.credentials.client.id",
            "transactional.id",
            "message.timeout.ms",
            "enable.idempotence",
        ] {
            assert!(!is_secret(key), "{key} is not a secret");
        }
        assert_eq!(edits_to_substring("password", "saslpasswrd"), 1);
        assert_eq!(edits_to_substring("password", "passwrod"), 1);
        assert_eq!(edits_to_substring("secret", "security"), 2);
    }

    /// A refused property's value is never in the error, secret-looking
    /// or not, nor is a text `-X` could not split.
    #[test]
    fn a_refused_value_is_not_shown() {
        let why = "Invalid value \"hunter2\" for configuration property \"sasl.passwrd\"";
        let redacted = redact_refused(why, "hunter2", [("sasl.password", "other-secret")]);
        assert!(!redacted.contains("hunter2"), "{redacted}");
        assert!(redacted.contains("sasl.passwrd"), "{redacted}");
        // A short value is replaced only where librdkafka quotes it.
        assert_eq!(
            redact_refused("Invalid value \"x\" for \"a.x\"", "x", []),
            "Invalid value \"[redacted]\" for \"a.x\""
        );
        let flag = flag_arg("sasl.password:hunter2").unwrap();
        assert!(flag.key.is_empty());
        let error = gather(None, &[flag]).unwrap_err().to_string();
        assert!(!error.contains("hunter2"), "{error}");
        assert!(error.contains("KEY=VALUE"), "{error}");
    }

    #[test]
    fn secrets_are_redacted() {
        for key in [
            "sasl.password",
            "sasl.jaas.config",
            "ssl.key.password",
            "ssl.keystore.password",
            "ssl.truststore.password",
            "sasl.oauthbearer.client.secret",
            "ssl.key.pem",
        ] {
            assert!(is_secret(key), "{key}");
            assert_eq!(shown(key, "hunter2"), REDACTED);
        }
        assert!(!is_secret("sasl.username"));
        assert_eq!(shown("sasl.username", "alice"), "alice");
        let property = Property {
            key: "sasl.password".into(),
            value: "hunter2".into(),
            origin: Origin::Flag,
        };
        assert_eq!(format!("{property:?}"), "sasl.password=[redacted] (-X)");
        assert_eq!(
            redact(
                "bad value \"hunter2\" for sasl.password",
                [("sasl.password", "hunter2"), ("sasl.username", "bad")]
            ),
            "bad value \"[redacted]\" for sasl.password"
        );
    }
}
