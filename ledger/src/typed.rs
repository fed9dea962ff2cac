//! Typed events: each domain (the engine's runs, the supervisor, the leaves, the
//! conductor) writes and reads its events as one enum, while the database keeps a kind
//! and a JSON payload per event, readable by anything.
//!
//! The kinds of every domain are listed here, so whoever folds a stream of events can
//! tell an event of another domain (to pass over) from an unknown kind (an error).

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::Event;
use super::Ledger;
use super::LedgerError;

/// The domain an event kind belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Domain {
    /// The engine's runs, plans and observations (`tdd-engine`).
    Run,
    /// Supervision of leaf processes (`tdd-supervisor`, recorded by `tdd-leaves`).
    Supervisor,
    /// Leaves, verdicts and stop requests (`tdd-leaves`).
    Leaves,
    /// The conductor's own journal (`tdd-conductor`).
    Conductor,
}

/// Kinds written by the supervisor's reporter.
pub const SUPERVISOR_KINDS: &[&str] = &["leaf_launched", "leaf_signalled", "leaf_exited"];

/// Kinds written by the leaves runtime, verdicts and stop requests.
pub const LEAVES_KINDS: &[&str] = &[
    "leaf_prepared",
    "leaf_started",
    "leaf_aborted",
    "leaf_finished",
    "verdict_recorded",
    "verdict_refused",
    "stop_requested",
    "stop_cleared",
];

/// Kinds of the conductor's journal.
pub const CONDUCTOR_KINDS: &[&str] = &[
    "conduct_bailed",
    "conduct_binary_accepted",
    "conduct_completed",
    "conduct_phase",
    "conduct_resumed",
    "conduct_run_abandoned",
    "conduct_run_started",
    "conduct_started",
    "conduct_step_done",
    "conduct_stopped",
    "forge_comment_posted",
    "forge_pr_opened",
    "forge_retry",
    "forge_statuses_posted",
    "forge_unreachable",
    "gate_refused",
    "head_realigned",
    "leaf_retried",
    "orphan_leaf_ended",
    "phase_reset",
    "phase_undone",
    "phase_verdict",
    "plan_invalid",
    "step_reset",
];

impl Domain {
    /// The kinds this crate lists for the domain, which [`domain_of`] tells apart;
    /// `None` for the engine's runs, whose kinds the engine passes in.
    pub const fn listed_kinds(self) -> Option<&'static [&'static str]> {
        match self {
            Domain::Run => None,
            Domain::Supervisor => Some(SUPERVISOR_KINDS),
            Domain::Leaves => Some(LEAVES_KINDS),
            Domain::Conductor => Some(CONDUCTOR_KINDS),
        }
    }
}

/// Whether `kinds` (a domain enum's) are exactly the kinds listed for `domain`, in any
/// order and each once; always true for the engine's runs. [`typed_events!`] checks it
/// at compile time, so an enum and the list [`domain_of`] reads cannot drift apart.
pub const fn lists_exactly(kinds: &[&str], domain: Domain) -> bool {
    let Some(listed) = domain.listed_kinds() else {
        return true;
    };
    if kinds.len() != listed.len() {
        return false;
    }
    let mut i = 0;
    while i < kinds.len() {
        if count(listed, kinds[i]) != 1 || count(kinds, kinds[i]) != 1 {
            return false;
        }
        i += 1;
    }
    true
}

/// How many times `kind` is in `kinds` (a `const` loop: `==` on `str` is not `const`).
const fn count(kinds: &[&str], kind: &str) -> usize {
    let mut n = 0;
    let mut i = 0;
    while i < kinds.len() {
        if same(kinds[i].as_bytes(), kind.as_bytes()) {
            n += 1;
        }
        i += 1;
    }
    n
}

/// Byte equality, usable in `const`.
const fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// A domain's events as one enum: its kinds, and how one event becomes a kind and a
/// payload and back.
pub trait TypedEvent: Serialize + DeserializeOwned + Sized {
    /// The domain of every kind of this enum.
    const DOMAIN: Domain;
    /// Every kind this enum reads and writes.
    const KINDS: &'static [&'static str];

    /// This event's kind.
    fn kind(&self) -> &'static str;
}

/// An event that could not be read as its domain's type.
#[derive(Debug, thiserror::Error)]
pub enum EventError {
    /// No domain knows the kind.
    #[error("event {id} has the unknown kind `{kind}`")]
    UnknownKind {
        /// The event's position in the chain.
        id: i64,
        /// Its kind.
        kind: String,
    },
    /// The payload is not what the kind says.
    #[error("event {id} (`{kind}`) does not parse")]
    Payload {
        /// The event's position in the chain.
        id: i64,
        /// Its kind.
        kind: String,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// A typed read asked for a kind its domain does not have (a bug of the caller).
    #[error("`{kind}` is not a kind of the {domain:?} events")]
    NotInDomain {
        /// The kind asked for.
        kind: String,
        /// The domain read.
        domain: Domain,
    },
    /// An event could not be encoded (a bug: every payload type serializes).
    #[error("a `{kind}` event could not be encoded")]
    Encode {
        /// Its kind.
        kind: &'static str,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
}

/// The domain `kind` belongs to, if any domain knows it. `run_kinds` are the engine's.
pub fn domain_of(kind: &str, run_kinds: &[&str]) -> Option<Domain> {
    if run_kinds.contains(&kind) {
        Some(Domain::Run)
    } else if SUPERVISOR_KINDS.contains(&kind) {
        Some(Domain::Supervisor)
    } else if LEAVES_KINDS.contains(&kind) {
        Some(Domain::Leaves)
    } else if CONDUCTOR_KINDS.contains(&kind) {
        Some(Domain::Conductor)
    } else {
        None
    }
}

/// The payload of `event`: the enum's adjacent `payload`, without its tag.
pub fn encode<E: TypedEvent>(event: &E) -> Result<serde_json::Value, EventError> {
    let kind = event.kind();
    let mut value =
        serde_json::to_value(event).map_err(|source| EventError::Encode { kind, source })?;
    Ok(value
        .get_mut("payload")
        .map(serde_json::Value::take)
        .unwrap_or_else(|| serde_json::json!({})))
}

/// `event` as `E` when its kind is one of `E`'s; `Ok(None)` for a kind of another domain
/// (given `E` is the engine's run events, or `run_kinds` names them); an error for a kind
/// no domain knows, or a payload that does not parse.
pub fn decode<E: TypedEvent>(event: &Event, run_kinds: &[&str]) -> Result<Option<E>, EventError> {
    if !E::KINDS.contains(&event.kind.as_str()) {
        return match domain_of(&event.kind, run_kinds) {
            Some(_) => Ok(None),
            None => Err(EventError::UnknownKind {
                id: event.id,
                kind: event.kind.clone(),
            }),
        };
    }
    <E as serde::Deserialize>::deserialize(Tagged {
        kind: &event.kind,
        payload: &event.payload,
        at: 0,
    })
    .map(Some)
    .map_err(|source| EventError::Payload {
        id: event.id,
        kind: event.kind.clone(),
        source,
    })
}

/// An event seen as the map `{"kind": …, "payload": …}` an adjacently tagged enum
/// reads, borrowing the payload rather than copying it.
struct Tagged<'a> {
    kind: &'a str,
    payload: &'a serde_json::Value,
    /// How many of the two entries were read.
    at: u8,
}

impl<'de> serde::Deserializer<'de> for Tagged<'de> {
    type Error = serde_json::Error;

    fn deserialize_any<V: serde::de::Visitor<'de>>(
        self,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        visitor.visit_map(self)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map struct enum
        identifier ignored_any
    }
}

impl<'de> serde::de::MapAccess<'de> for Tagged<'de> {
    type Error = serde_json::Error;

    fn next_key_seed<K: serde::de::DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Self::Error> {
        let key = match self.at {
            0 => "kind",
            1 => "payload",
            _ => return Ok(None),
        };
        seed.deserialize(serde::de::value::BorrowedStrDeserializer::new(key))
            .map(Some)
    }

    fn next_value_seed<V: serde::de::DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, Self::Error> {
        self.at += 1;
        if self.at == 1 {
            seed.deserialize(serde::de::value::BorrowedStrDeserializer::new(self.kind))
        } else {
            seed.deserialize(self.payload)
        }
    }
}

impl Ledger {
    /// Appends a typed event: its kind and payload as [`encode`] gives them.
    pub fn record<E: TypedEvent>(
        &mut self,
        run_id: Option<&str>,
        event: &E,
    ) -> Result<Event, LedgerError> {
        let payload = encode(event)?;
        self.append(run_id, event.kind(), &payload)
    }

    /// The events of `kinds` (of `run_id`, or of every run with `None`), oldest first,
    /// each read as `E` with the event it came from. Every kind asked for must be one of
    /// `E`'s ([`EventError::NotInDomain`] otherwise, so a misspelt kind is an error and
    /// never an empty answer), and a payload that does not parse as its kind is an error
    /// naming the event: a typed read never skips what it cannot read.
    pub fn typed<E: TypedEvent>(
        &self,
        run_id: Option<&str>,
        kinds: &[&str],
    ) -> Result<Vec<(Event, E)>, LedgerError> {
        if let Some(kind) = kinds.iter().find(|k| !E::KINDS.contains(k)) {
            return Err(EventError::NotInDomain {
                kind: (*kind).to_string(),
                domain: E::DOMAIN,
            }
            .into());
        }
        let mut typed = Vec::new();
        for event in self.events_of_kinds(run_id, kinds)? {
            if let Some(read) = decode::<E>(&event, &[])? {
                typed.push((event, read));
            }
        }
        Ok(typed)
    }
}

/// Declares a domain's event enum: each variant with its kind and payload type, the
/// [`TypedEvent`] implementation, and the list of kinds. The build fails when the kinds
/// differ from those this crate lists for the domain ([`lists_exactly`]).
#[macro_export]
macro_rules! typed_events {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident in $domain:ident {
            $( $(#[$vmeta:meta])* $kind:literal => $variant:ident($payload:ty), )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
        #[serde(tag = "kind", content = "payload")]
        $vis enum $name {
            $( $(#[$vmeta])* #[serde(rename = $kind)] $variant($payload), )*
        }

        impl $crate::TypedEvent for $name {
            const DOMAIN: $crate::Domain = $crate::Domain::$domain;
            const KINDS: &'static [&'static str] = &[$($kind),*];

            fn kind(&self) -> &'static str {
                match self {
                    $( $name::$variant(_) => $kind, )*
                }
            }
        }

        const _: () = assert!(
            $crate::lists_exactly(<$name as $crate::TypedEvent>::KINDS, $crate::Domain::$domain),
            "the enum's kinds differ from those tdd-ledger lists for its domain",
        );
    };
}
