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

/// True for a property whose value is a secret: a password, a private key,
/// a client secret, a JAAS configuration (which holds a password), or
/// OAUTHBEARER's configuration (which may).
pub fn is_secret(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    key.contains("password")
        || key.contains("secret")
        || key.contains("jaas")
        || key == "ssl.key.pem"
        || key == "ssl_key"
        || key == "ssl.keystore.location.pem"
        || key == "sasl.oauthbearer.config"
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
    /// librdkafka refused a property: an unknown name or a bad value.
    #[error("{origin}: client property `{key}` = {value}: {why}")]
    Refused {
        /// The property.
        key: String,
        /// Its value, or [`REDACTED`] for a secret.
        value: String,
        /// Where it was given.
        origin: Origin,
        /// librdkafka's reason, with a secret's value removed.
        why: String,
    },
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
    all.extend(flags.iter().cloned());
    translate_java(all)
}

/// `properties` with the Java clients' names read as librdkafka's:
/// `sasl.jaas.config` as `sasl.username` and `sasl.password` (given where
/// the JAAS configuration was, so a later explicit `sasl.username` or
/// `sasl.password` still wins), and a PEM trust store
/// (`ssl.truststore.type=PEM`, `ssl.truststore.location`) as
/// `ssl.ca.location`. A JKS or PKCS12 trust store is refused by name:
/// librdkafka reads a CA as PEM.
pub fn translate_java(properties: Vec<Property>) -> Result<Vec<Property>, PropertiesError> {
    let store_type = properties
        .iter()
        .rev()
        .find(|property| property.key == "ssl.truststore.type")
        .map(|property| (property.value.to_ascii_uppercase(), property.origin.clone()));
    let mut out = Vec::with_capacity(properties.len());
    for property in properties {
        if property.key == "ssl.truststore.type" {
            continue;
        }
        if property.key == "ssl.truststore.location" {
            match &store_type {
                Some((kind, _)) if kind == "PEM" => out.push(Property {
                    key: "ssl.ca.location".into(),
                    value: property.value,
                    origin: property.origin,
                }),
                other => {
                    return Err(PropertiesError::Syntax {
                        origin: property.origin,
                        why: format!(
                            "ssl.truststore.location of type {}: librdkafka reads a CA as PEM; \
                             give ssl.truststore.type=PEM with a PEM file, or ssl.ca.location",
                            other
                                .as_ref()
                                .map_or("JKS (the default)", |(kind, _)| kind.as_str())
                        ),
                    })
                }
            }
            continue;
        }
        if property.key == "ssl.truststore.password" {
            // A PEM trust store has no password.
            continue;
        }
        if property.key != "sasl.jaas.config" {
            out.push(property);
            continue;
        }
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
    Ok(out)
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
        let after = after.trim_start();
        let (value, next) = if let Some(quoted) = after.strip_prefix('"') {
            let end = quoted
                .find('"')
                .ok_or_else(|| format!("option `{name}`: the quoted value has no closing quote"))?;
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
