//! The keys of a settings file, derived from the serde structs that read it: which keys a
//! struct has ([`keys_of`], in declaration order, for "known: …" and "did you mean"), and
//! which keys of a document it did not read ([`read_noting_unknown`], through the
//! `serde_ignored` crate, as cargo and cargo-nextest find the unknown keys of their
//! configuration). No list of keys is kept by hand.

use serde::de::{self, Deserialize, DeserializeOwned, Deserializer, Visitor};

/// The keys of the serde struct `T`, in declaration order, as its derived `Deserialize`
/// names them (renames applied). Empty for a type that is not a struct.
pub(crate) fn keys_of<T: DeserializeOwned>() -> &'static [&'static str] {
    let mut keys: &'static [&'static str] = &[];
    // The probe always ends in an error: it only asks for the struct's field names.
    let _ = T::deserialize(FieldNames(&mut keys));
    keys
}

/// A deserializer that answers nothing and notes the field names a struct asks for.
struct FieldNames<'a>(&'a mut &'static [&'static str]);

impl<'de> Deserializer<'de> for FieldNames<'_> {
    type Error = de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(de::Error::custom("not a struct"))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Self::Error> {
        *self.0 = fields;
        Err(de::Error::custom("names only"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

/// Deserialize `de` as `T`, noting each key `T` does not have: returns the result (its error
/// with the path of the key whose value broke its rule) and the unknown keys, dotted
/// (`worktree.setpu`), in the order they were met.
pub(crate) fn read_noting_unknown<'de, T, D>(
    de: D,
) -> (Result<T, serde_path_to_error::Error<D::Error>>, Vec<String>)
where
    T: Deserialize<'de>,
    D: Deserializer<'de>,
{
    let mut unknown = Vec::new();
    let mut note = |path: serde_ignored::Path<'_>| unknown.push(dotted(&path));
    let result = serde_path_to_error::deserialize(serde_ignored::Deserializer::new(de, &mut note));
    (result, unknown)
}

/// A key path as the messages write it: its keys joined by `.`, list entries as `[N]`
/// (`worktree.setpu`, `stages[1].runer`); an `Option` or a newtype adds nothing.
fn dotted(path: &serde_ignored::Path<'_>) -> String {
    use serde_ignored::Path;
    match path {
        Path::Root => String::new(),
        Path::Seq { parent, index } => format!("{}[{index}]", dotted(parent)),
        Path::Map { parent, key } => match dotted(parent) {
            p if p.is_empty() => key.clone(),
            p => format!("{p}.{key}"),
        },
        Path::Some { parent }
        | Path::NewtypeStruct { parent }
        | Path::NewtypeVariant { parent } => dotted(parent),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Inner {
        copy: Option<u8>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Outer {
        first: Option<u8>,
        #[serde(rename = "second_key")]
        second: Option<u8>,
        inner: Option<Inner>,
    }

    #[test]
    fn a_structs_keys_come_in_declaration_order_with_renames() {
        assert_eq!(keys_of::<Outer>(), ["first", "second_key", "inner"]);
        assert_eq!(keys_of::<Inner>(), ["copy"]);
        assert!(keys_of::<u8>().is_empty());
    }

    #[test]
    fn unknown_keys_are_noted_with_their_dotted_path() {
        let v = serde_json::json!({"frist": 1, "inner": {"copy": 2, "cpoy": 3}, "first": 4});
        let (got, unknown) = read_noting_unknown::<Outer, _>(v);
        assert_eq!(got.expect("valid").first, Some(4));
        assert_eq!(unknown, ["frist", "inner.cpoy"]);
    }
}
