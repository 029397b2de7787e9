//! A stage's state read by key, like Kafka Streams'
//! `TopologyTestDriver::getKeyValueStore(name).get(key)`.

use std::marker::PhantomData;
use std::sync::Arc;

use parsley::partition_for;
use parsley::SlotKey;

use crate::driver::error::DriverError;
use crate::driver::keys::StoreKey;
use crate::driver::Shared;

/// The committed state of a stateful stage, by key: a live view (each
/// [`get`](Self::get) reads what is committed then), returned by
/// [`crate::TestDriver::store`].
///
/// The stage's slots are keyed by the keys' bytes, and every task of a
/// stage consumes the same partition number of each of its sources; so a
/// key is encoded as the first source whose key type and codec it matches
/// encodes keys ([`StoreKey`]), and hashed against that source's partition
/// count to find the task that holds its slot.
pub struct KeyValueStore<S> {
    pub(crate) world: Arc<Shared>,
    pub(crate) stage: String,
    pub(crate) state: PhantomData<fn() -> S>,
}

impl<S: Clone + 'static> KeyValueStore<S> {
    /// The committed state of `key`'s slot; `None` when the key is unseen
    /// or its slot was deleted (it then reads as the stage's initial value),
    /// as Kafka Streams' `get` returns null. Refused
    /// ([`DriverError::StoreKeyType`]) when no source of the stage has keys
    /// of `key`'s type and codec.
    ///
    /// ```
    /// use parsley::{Parsley, Stage, Step, Topic, Utf8, I64};
    /// use parsley_sim::TestDriver;
    ///
    /// let views = Topic::<String, i64>::with_codecs("views", Utf8, I64);
    /// let count = Stage::named("count")
    ///     .state(I64, || 0i64)
    ///     .on(&views, |seen: i64, _view| Step::of(seen + 1))
    ///     .build();
    /// let driver = TestDriver::new(&Parsley::named("site").stage(count).build()?)?;
    /// driver.input(&views)?.pipe("home", 3)?;
    /// driver.input(&views)?.pipe("home", 4)?;
    /// let store = driver.store::<i64>("count")?;
    /// assert_eq!(store.get("home")?, Some(2));
    /// assert_eq!(store.get("about")?, None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn get(&self, key: impl StoreKey) -> Result<Option<S>, DriverError> {
        let world = self.world.lock();
        let plan = world
            .app
            .stage(&self.stage)
            .expect("the stage was checked when the store was made");
        let mut sources = Vec::new();
        for source in plan.stage.sources() {
            let name = source.name.as_str();
            let declared = world.app.declaration(name).unwrap_or(source);
            let codecs = declared.codecs().unwrap_or_default();
            let Some(bytes) = key.encode_for(&codecs) else {
                sources.push(format!("{name} ({codecs})"));
                continue;
            };
            let bytes = bytes.map_err(|error| DriverError::InputCodec {
                topic: name.to_string(),
                part: "key",
                error,
            })?;
            let partitions =
                world
                    .cluster
                    .partitions(name)
                    .ok_or_else(|| DriverError::UnknownTopic {
                        topic: name.to_string(),
                    })?;
            let partition = partition_for(Some(&bytes), partitions, 0);
            let index = world.task_index(&self.stage, partition)?;
            let slots = world.hosts[index].task.slots::<S>().ok_or_else(|| {
                DriverError::WrongStateType {
                    stage: self.stage.clone(),
                    type_name: std::any::type_name::<S>(),
                }
            })?;
            return Ok(slots.committed(&SlotKey::Key(bytes)).cloned());
        }
        Err(DriverError::StoreKeyType {
            stage: self.stage.clone(),
            key_type: std::any::type_name_of_val(&key),
            sources,
        })
    }

    /// How many keys hold committed state, over every task of the stage
    /// (Kafka Streams' `approximateNumEntries`, exact here). The null key's
    /// slot and the tick slots are not counted.
    #[doc(alias = "approximateNumEntries")]
    pub fn len(&self) -> usize {
        let world = self.world.lock();
        world
            .hosts
            .iter()
            .filter(|host| *host.task.id().stage == *self.stage)
            .filter_map(|host| host.task.slots::<S>())
            .map(|slots| {
                slots
                    .committed_slots()
                    .filter(|(slot, _)| matches!(slot, SlotKey::Key(_)))
                    .count()
            })
            .sum()
    }

    /// Whether no key holds committed state.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
