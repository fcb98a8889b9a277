//! Explicit, stable codes for the variants of stored enums.
//!
//! postcard writes an enum's variant as a number, and serde's derive numbers variants by
//! their place in the declaration: inserting, removing or moving a variant would renumber
//! every later one in every stored row and log entry, and an old store would be misread
//! without an error. So every enum that is stored or carried in the Raft log lists its
//! variants with explicit codes in [`stable_codes!`], and the code, not the place, is what
//! goes to disk.
//!
//! How an enum is pinned: derive `Serialize` and `Deserialize` with
//! `#[serde(remote = "Self")]` (serde then writes the field code as inherent functions
//! instead of implementing the traits), and invoke `stable_codes!` with one
//! `code => Variant` line per variant. The macro implements the traits on top of the derived
//! code through [`Encoder`] and [`Decoder`], which replace only the variant number:
//!
//! - encoding writes the variant's code where serde would write its index; the code comes
//!   from an exhaustive `match`, so a variant without a code does not compile;
//! - decoding reads the code and maps it back to the variant; an unknown code is a decode
//!   error (a corrupt or newer store), never another variant;
//! - two variants sharing a code fail to compile (a `const` assertion);
//! - self-describing formats (JSON) still see and accept the variant names.
//!
//! Rules for changing a pinned enum: a new variant takes the next unused code (its place in
//! the declaration does not matter); a removed variant's code is never reused (leave a
//! comment with the retired code); changing a variant's fields changes its stored bytes, so
//! it needs a new encoding version that still reads the old one. `crate::golden` holds the
//! bytes of one sample per variant and fails on any change.
//!
//! The derived functions stay callable as `Type::serialize(&value, serializer)` and
//! `Type::deserialize(deserializer)` and write declaration indices: always go through the
//! `Serialize` and `Deserialize` traits (as `codec`, postcard and serde_json do).

use std::marker::PhantomData;

use serde::Serializer;
use serde::de::{self, DeserializeSeed, Deserializer, EnumAccess, Visitor};

/// An enum whose variants are stored under explicit codes (implemented by [`stable_codes!`]).
pub(crate) trait StableCodes {
    /// The enum's name, for errors.
    const ENUM: &'static str;
    /// `(code, serde name)` of every variant.
    const CODES: &'static [(u32, &'static str)];

    /// The code of this value's variant.
    fn stable_code(&self) -> u32;

    /// The serde name of the variant stored under `code`, if any.
    fn variant_of(code: u32) -> Option<&'static str>;
}

/// Whether no two entries of `codes` share a code (checked at compile time by the macro).
pub(crate) const fn distinct(codes: &[(u32, &str)]) -> bool {
    let mut i = 0;
    while i < codes.len() {
        let mut j = i + 1;
        while j < codes.len() {
            if codes[i].0 == codes[j].0 {
                return false;
            }
            j += 1;
        }
        i += 1;
    }
    true
}

/// The serde name of a variant: its identifier, or the name given after `as` for an enum
/// that renames its variants.
macro_rules! serde_name {
    ($variant:ident) => {
        stringify!($variant)
    };
    ($variant:ident, $name:literal) => {
        $name
    };
}
pub(crate) use serde_name;

/// Pins the variant codes of a stored enum and implements `Serialize` and `Deserialize`
/// with them. The enum must derive both with `#[serde(remote = "Self")]`.
///
/// ```ignore
/// stable_codes! {
///     Tier {
///         0 => Local,
///         1 => Cell,
///         2 => Fabric,
///     }
/// }
/// ```
macro_rules! stable_codes {
    ($ty:ident { $($code:literal => $variant:ident $(as $name:literal)?,)* }) => {
        impl $crate::codes::StableCodes for $ty {
            const ENUM: &'static str = stringify!($ty);
            const CODES: &'static [(u32, &'static str)] =
                &[$(($code, $crate::codes::serde_name!($variant $(, $name)?)),)*];

            fn stable_code(&self) -> u32 {
                match self {
                    $($ty::$variant { .. } => $code,)*
                }
            }

            fn variant_of(code: u32) -> Option<&'static str> {
                match code {
                    $($code => Some($crate::codes::serde_name!($variant $(, $name)?)),)*
                    _ => None,
                }
            }
        }

        const _: () = assert!(
            $crate::codes::distinct(<$ty as $crate::codes::StableCodes>::CODES),
            concat!("two variants of ", stringify!($ty), " share a code"),
        );

        impl serde::Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let code = <$ty as $crate::codes::StableCodes>::stable_code(self);
                $ty::serialize(self, $crate::codes::Encoder::new(serializer, code))
            }
        }

        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                $ty::deserialize($crate::codes::Decoder::<D, $ty>::new(deserializer))
            }
        }
    };
}
pub(crate) use stable_codes;

/// A serializer that writes `code` where the derived code writes a variant's index, and
/// otherwise is `inner`.
pub(crate) struct Encoder<S> {
    inner: S,
    code: u32,
}

impl<S> Encoder<S> {
    /// `inner`, writing the next variant as `code`.
    pub(crate) fn new(inner: S, code: u32) -> Self {
        Encoder { inner, code }
    }
}

macro_rules! forward_values {
    ($($method:ident($ty:ty);)*) => {$(
        fn $method(self, value: $ty) -> Result<S::Ok, S::Error> {
            self.inner.$method(value)
        }
    )*};
}

impl<S: Serializer> Serializer for Encoder<S> {
    type Ok = S::Ok;
    type Error = S::Error;
    type SerializeSeq = S::SerializeSeq;
    type SerializeTuple = S::SerializeTuple;
    type SerializeTupleStruct = S::SerializeTupleStruct;
    type SerializeTupleVariant = S::SerializeTupleVariant;
    type SerializeMap = S::SerializeMap;
    type SerializeStruct = S::SerializeStruct;
    type SerializeStructVariant = S::SerializeStructVariant;

    forward_values! {
        serialize_bool(bool); serialize_i8(i8); serialize_i16(i16); serialize_i32(i32);
        serialize_i64(i64); serialize_i128(i128); serialize_u8(u8); serialize_u16(u16);
        serialize_u32(u32); serialize_u64(u64); serialize_u128(u128); serialize_f32(f32);
        serialize_f64(f64); serialize_char(char); serialize_str(&str);
        serialize_bytes(&[u8]); serialize_unit_struct(&'static str);
    }

    fn serialize_none(self) -> Result<S::Ok, S::Error> {
        self.inner.serialize_none()
    }

    fn serialize_some<T: ?Sized + serde::Serialize>(self, value: &T) -> Result<S::Ok, S::Error> {
        self.inner.serialize_some(value)
    }

    fn serialize_unit(self) -> Result<S::Ok, S::Error> {
        self.inner.serialize_unit()
    }

    fn serialize_unit_variant(
        self,
        name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<S::Ok, S::Error> {
        self.inner.serialize_unit_variant(name, self.code, variant)
    }

    fn serialize_newtype_struct<T: ?Sized + serde::Serialize>(
        self,
        name: &'static str,
        value: &T,
    ) -> Result<S::Ok, S::Error> {
        self.inner.serialize_newtype_struct(name, value)
    }

    fn serialize_newtype_variant<T: ?Sized + serde::Serialize>(
        self,
        name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<S::Ok, S::Error> {
        (self.inner).serialize_newtype_variant(name, self.code, variant, value)
    }

    fn serialize_seq(self, len: Option<usize>) -> Result<S::SerializeSeq, S::Error> {
        self.inner.serialize_seq(len)
    }

    fn serialize_tuple(self, len: usize) -> Result<S::SerializeTuple, S::Error> {
        self.inner.serialize_tuple(len)
    }

    fn serialize_tuple_struct(
        self,
        name: &'static str,
        len: usize,
    ) -> Result<S::SerializeTupleStruct, S::Error> {
        self.inner.serialize_tuple_struct(name, len)
    }

    fn serialize_tuple_variant(
        self,
        name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<S::SerializeTupleVariant, S::Error> {
        self.inner
            .serialize_tuple_variant(name, self.code, variant, len)
    }

    fn serialize_map(self, len: Option<usize>) -> Result<S::SerializeMap, S::Error> {
        self.inner.serialize_map(len)
    }

    fn serialize_struct(
        self,
        name: &'static str,
        len: usize,
    ) -> Result<S::SerializeStruct, S::Error> {
        self.inner.serialize_struct(name, len)
    }

    fn serialize_struct_variant(
        self,
        name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<S::SerializeStructVariant, S::Error> {
        self.inner
            .serialize_struct_variant(name, self.code, variant, len)
    }

    fn is_human_readable(&self) -> bool {
        self.inner.is_human_readable()
    }
}

/// A deserializer that reads a variant's code where the derived code reads its index, and
/// otherwise is `inner`.
pub(crate) struct Decoder<D, T> {
    inner: D,
    codes: PhantomData<T>,
}

impl<D, T> Decoder<D, T> {
    /// `inner`, reading the next variant of `T` as a code.
    pub(crate) fn new(inner: D) -> Self {
        Decoder {
            inner,
            codes: PhantomData,
        }
    }
}

macro_rules! forward_reads {
    ($($method:ident)*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
            self.inner.$method(visitor)
        }
    )*};
}

impl<'de, D: Deserializer<'de>, T: StableCodes> Deserializer<'de> for Decoder<D, T> {
    type Error = D::Error;

    forward_reads! {
        deserialize_any deserialize_bool deserialize_i8 deserialize_i16 deserialize_i32
        deserialize_i64 deserialize_i128 deserialize_u8 deserialize_u16 deserialize_u32
        deserialize_u64 deserialize_u128 deserialize_f32 deserialize_f64 deserialize_char
        deserialize_str deserialize_string deserialize_bytes deserialize_byte_buf
        deserialize_option deserialize_unit deserialize_seq deserialize_map
        deserialize_identifier deserialize_ignored_any
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.inner.deserialize_unit_struct(name, visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.inner.deserialize_newtype_struct(name, visitor)
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.inner.deserialize_tuple(len, visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.inner.deserialize_tuple_struct(name, len, visitor)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.inner.deserialize_struct(name, fields, visitor)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        let coded = Coded::<V, T> {
            inner: visitor,
            codes: PhantomData,
        };
        self.inner.deserialize_enum(name, variants, coded)
    }

    fn is_human_readable(&self) -> bool {
        self.inner.is_human_readable()
    }
}

/// Wraps the derived enum visitor, its enum access and its variant seed, so that the
/// variant is read as a code of `T` and handed to the derived code by name.
struct Coded<I, T> {
    inner: I,
    codes: PhantomData<T>,
}

impl<I, T> Coded<I, T> {
    fn wrap<J>(inner: J) -> Coded<J, T> {
        Coded {
            inner,
            codes: PhantomData,
        }
    }
}

impl<'de, V: Visitor<'de>, T: StableCodes> Visitor<'de> for Coded<V, T> {
    type Value = V::Value;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.expecting(formatter)
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<V::Value, A::Error> {
        self.inner.visit_enum(Coded::<V, T>::wrap::<A>(data))
    }
}

impl<'de, A: EnumAccess<'de>, T: StableCodes> EnumAccess<'de> for Coded<A, T> {
    type Error = A::Error;
    type Variant = A::Variant;

    fn variant_seed<S: DeserializeSeed<'de>>(
        self,
        seed: S,
    ) -> Result<(S::Value, A::Variant), A::Error> {
        self.inner.variant_seed(Coded::<A, T>::wrap::<S>(seed))
    }
}

impl<'de, S: DeserializeSeed<'de>, T: StableCodes> DeserializeSeed<'de> for Coded<S, T> {
    type Value = S::Value;

    fn deserialize<E: Deserializer<'de>>(self, deserializer: E) -> Result<S::Value, E::Error> {
        deserializer.deserialize_identifier(VariantCode::<S, T> {
            seed: self.inner,
            codes: PhantomData,
        })
    }
}

/// Reads a variant identifier: a code (postcard) or a name (self-describing formats).
struct VariantCode<S, T> {
    seed: S,
    codes: PhantomData<T>,
}

impl<'de, S: DeserializeSeed<'de>, T: StableCodes> Visitor<'de> for VariantCode<S, T> {
    type Value = S::Value;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "a variant code or name of {}", T::ENUM)
    }

    fn visit_u64<E: de::Error>(self, code: u64) -> Result<S::Value, E> {
        let name = u32::try_from(code).ok().and_then(T::variant_of);
        match name {
            Some(name) => self
                .seed
                .deserialize(de::value::StrDeserializer::<E>::new(name)),
            None => Err(E::custom(format_args!(
                "unsupported_encoding: {} has no variant with code {code}",
                T::ENUM
            ))),
        }
    }

    fn visit_str<E: de::Error>(self, name: &str) -> Result<S::Value, E> {
        self.seed
            .deserialize(de::value::StrDeserializer::<E>::new(name))
    }

    fn visit_bytes<E: de::Error>(self, name: &[u8]) -> Result<S::Value, E> {
        self.seed
            .deserialize(de::value::BytesDeserializer::<E>::new(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pinned enum whose declaration order differs from its codes.
    #[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
    #[serde(remote = "Self")]
    enum Shape {
        Square(u8),
        Unit,
        Circle { radius: u32 },
        Pair(u8, u8),
    }

    stable_codes! {
        Shape {
            7 => Unit,
            3 => Square,
            9 => Circle,
            4 => Pair,
        }
    }

    fn all() -> Vec<Shape> {
        vec![
            Shape::Square(5),
            Shape::Unit,
            Shape::Circle { radius: 300 },
            Shape::Pair(1, 2),
        ]
    }

    #[test]
    fn postcard_writes_codes_not_positions() {
        let bytes: Vec<Vec<u8>> = all()
            .iter()
            .map(|s| postcard::to_stdvec(s).unwrap())
            .collect();
        assert_eq!(
            bytes,
            [vec![3, 5], vec![7], vec![9, 0xac, 0x02], vec![4, 1, 2]]
        );
        for (shape, bytes) in all().iter().zip(&bytes) {
            assert_eq!(&postcard::from_bytes::<Shape>(bytes).unwrap(), shape);
        }
    }

    #[test]
    fn an_unknown_code_is_an_error_never_another_variant() {
        // Code 0 is the declaration index of `Square` but no code of `Shape`.
        assert!(postcard::from_bytes::<Shape>(&[0, 5]).is_err());
        assert!(postcard::from_bytes::<Shape>(&[200, 1]).is_err());
    }

    #[test]
    fn json_keeps_variant_names() {
        for shape in all() {
            let text = serde_json::to_string(&shape).unwrap();
            assert_eq!(serde_json::from_str::<Shape>(&text).unwrap(), shape);
        }
        let text = serde_json::to_string(&Shape::Circle { radius: 1 }).unwrap();
        assert_eq!(text, r#"{"Circle":{"radius":1}}"#);
    }

    #[test]
    fn codes_are_checked_for_duplicates() {
        assert!(distinct(&[(0, "a"), (2, "b"), (1, "c")]));
        assert!(!distinct(&[(0, "a"), (2, "b"), (0, "c")]));
    }
}
