//! What built-in logic whose deliveries read and write many slots (a
//! windowed aggregation, W2; expiring state, E2) shares: a delivery's slot
//! changes encoded into its outcome, proposed to the task's slots in the
//! order the task accepts them, and the slots a replay is given, decoded.

use std::collections::HashMap;

use crate::codec::{encode_chunked, Codec};
use crate::emission::Emission;
use crate::stage::logic::{DeliveryFailure, Outcome, ReplayFailure, SlotWrite};
use crate::stage::slots::{SlotKey, Slots};

/// A delivery's new slot states, in the order the task accepts them.
pub(crate) type Proposals<T> = Vec<Option<T>>;

/// What one delivery changes: the delivery's own slot (its record's key,
/// or the tick slot), the other slots in changelog order (`None` deletes),
/// and its emissions.
pub(crate) struct SlotChanges<T> {
    pub own: Option<(SlotKey, Option<T>)>,
    pub others: Vec<(SlotKey, Option<T>)>,
    pub emissions: Vec<Emission>,
}

fn slot_write<T: 'static>(
    codec: &dyn Codec<T>,
    slot: SlotKey,
    state: &Option<T>,
) -> Result<SlotWrite, DeliveryFailure> {
    let encoded = state
        .as_ref()
        .map(|state| encode_chunked(codec, state))
        .transpose()
        .map_err(DeliveryFailure::StateCodec)?;
    Ok(SlotWrite { slot, encoded })
}

/// The outcome of `changes` (the own slot's write first, then the others'),
/// and the states to propose in that order.
pub(crate) fn outcome<T: 'static>(
    codec: &dyn Codec<T>,
    changes: SlotChanges<T>,
) -> Result<(Outcome, Proposals<T>), DeliveryFailure> {
    let mut states = Vec::with_capacity(changes.others.len() + 1);
    let write = match changes.own {
        Some((slot, state)) => {
            let write = slot_write(codec, slot, &state)?;
            states.push(state);
            Some(write)
        }
        None => None,
    };
    let mut more_writes = Vec::with_capacity(changes.others.len());
    for (slot, state) in changes.others {
        more_writes.push(slot_write(codec, slot, &state)?);
        states.push(state);
    }
    let outcome = Outcome {
        emissions: changes.emissions,
        write,
        more_writes,
        ..Outcome::default()
    };
    Ok((outcome, states))
}

/// Applies an outcome's states to the task's slots, as proposals.
pub(crate) fn propose<T>(slots: &mut Slots<T>, states: Proposals<T>) {
    let mut states = states.into_iter();
    if let Some(first) = states.next() {
        slots.propose(first);
        for state in states {
            slots.propose_more(state);
        }
    }
}

/// The slots a replay is given, decoded with `codec`.
pub(crate) fn decoded<T: 'static>(
    codec: &dyn Codec<T>,
    given: &[(SlotKey, &[u8])],
) -> Result<HashMap<SlotKey, T>, ReplayFailure> {
    given
        .iter()
        .map(|(slot, bytes)| {
            Ok((
                slot.clone(),
                codec.decode(bytes).map_err(ReplayFailure::State)?,
            ))
        })
        .collect()
}
