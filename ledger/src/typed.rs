//! Typed events: each domain (the engine's runs, the supervisor, the leaves, the
//! conductor) writes and reads its events as one enum, while the database keeps a kind
//! and a JSON payload per event, readable by anything.
//!
//! Each domain declares its own kinds; whoever folds a stream of events is handed the
//! registry of every domain's ([`Kinds`]), so it can tell an event of another domain
//! (to pass over) from an unknown kind (an error). This crate names no domain's kinds.

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::Event;
use super::Ledger;
use super::LedgerError;

/// Every event kind a reader knows, by domain: each domain crate declares its own
/// (its [`TypedEvent`] enum's `KINDS`), and whoever reads a stream that mixes domains
/// is handed the whole registry by the top of the program, so a fold can pass over
/// another domain's event and refuse a kind no domain declares. This crate names none.
#[derive(Debug, Clone, Copy)]
pub struct Kinds(&'static [(&'static str, &'static [&'static str])]);

impl Kinds {
    /// No kinds at all: every kind but a reader's own is unknown to it.
    pub const NONE: Kinds = Kinds(&[]);

    /// The registry of `domains`, each a name and its kinds. [`Kinds::distinct`] says
    /// whether no kind is declared twice; check it where the registry is built.
    pub const fn new(domains: &'static [(&'static str, &'static [&'static str])]) -> Kinds {
        Kinds(domains)
    }

    /// The domain that declares `kind`, if one does.
    pub fn domain_of(&self, kind: &str) -> Option<&'static str> {
        self.0
            .iter()
            .find(|(_, kinds)| kinds.contains(&kind))
            .map(|(domain, _)| *domain)
    }

    /// Whether every kind is declared once, by one domain (usable in `const`, so a
    /// registry can be checked when the build makes it).
    pub const fn distinct(&self) -> bool {
        let mut d = 0;
        while d < self.0.len() {
            let kinds = self.0[d].1;
            let mut k = 0;
            while k < kinds.len() {
                let mut seen = 0;
                let mut e = 0;
                while e < self.0.len() {
                    seen += count(self.0[e].1, kinds[k]);
                    e += 1;
                }
                if seen != 1 {
                    return false;
                }
                k += 1;
            }
            d += 1;
        }
        true
    }

    /// The domains, each with its kinds, in the order given.
    pub fn domains(&self) -> &'static [(&'static str, &'static [&'static str])] {
        self.0
    }
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
    /// The domain every kind of this enum belongs to, in words.
    const DOMAIN: &'static str;
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
    #[error("`{kind}` is not a kind of the {domain} events")]
    NotInDomain {
        /// The kind asked for.
        kind: String,
        /// The domain read.
        domain: &'static str,
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

/// `event` as `E` when its kind is one of `E`'s; `Ok(None)` for a kind another domain of
/// `known` declares; an error for a kind no domain declares, or a payload that does not
/// parse as its kind.
pub fn decode<E: TypedEvent>(event: &Event, known: &Kinds) -> Result<Option<E>, EventError> {
    if !E::KINDS.contains(&event.kind.as_str()) {
        return match known.domain_of(&event.kind) {
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

/// `event` as `E` when its kind is one of `E`'s, `Ok(None)` for any other kind (known to
/// a domain or not): for a reader that looks only for its own events in a mixed stream.
/// A payload that does not parse as its kind is an error, never passed over.
pub fn decode_own<E: TypedEvent>(event: &Event) -> Result<Option<E>, EventError> {
    if E::KINDS.contains(&event.kind.as_str()) {
        decode::<E>(event, &Kinds::NONE)
    } else {
        Ok(None)
    }
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
            if let Some(read) = decode_own::<E>(&event)? {
                typed.push((event, read));
            }
        }
        Ok(typed)
    }
}

/// Declares a domain's event enum: each variant with its kind and payload type, the
/// [`TypedEvent`] implementation, and the list of kinds (`KINDS`), which is what the
/// domain registers in a [`Kinds`]. The build fails when a kind is declared twice.
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
            const DOMAIN: &'static str = stringify!($domain);
            const KINDS: &'static [&'static str] = &[$($kind),*];

            fn kind(&self) -> &'static str {
                match self {
                    $( $name::$variant(_) => $kind, )*
                }
            }
        }

        const _: () = assert!(
            $crate::Kinds::new(&[("", <$name as $crate::TypedEvent>::KINDS)]).distinct(),
            "the enum declares a kind twice",
        );
    };
}
