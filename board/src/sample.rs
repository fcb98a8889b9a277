//! Deterministic sample values of stored types, for the encoding fixtures and golden tests.
//!
//! [`nth`] builds the value of a type whose outermost enum takes the variant the encoding
//! writes as `choice`, by running the type's own `Deserialize` over a synthetic input.
//! Every other value comes from the name of the field it fills: a string is the field's
//! name, a number is derived from it, a list holds one element, an option is `Some`, a
//! nested enum takes the variant written as 0. So a sample is the same on every build,
//! and reordering two fields of a variant changes its bytes.

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, IntoDeserializer, Visitor};

/// Why a sample could not be built (the choice names no variant, or an unsupported shape).
#[derive(Debug)]
pub(crate) struct SampleError(String);

impl std::fmt::Display for SampleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SampleError {}

impl de::Error for SampleError {
    fn custom<T: std::fmt::Display>(message: T) -> Self {
        SampleError(message.to_string())
    }
}

type Result<T> = std::result::Result<T, SampleError>;

/// Nesting past this depth yields empty lists, so recursive types stay finite.
const DEPTH_MAX: u32 = 6;

/// The sample of `T` whose outermost enum is written with variant number `choice`; an
/// error once `choice` is past the last variant.
pub(crate) fn nth<T: for<'de> Deserialize<'de>>(choice: u32) -> Result<T> {
    T::deserialize(Sample {
        label: String::from("value"),
        choice: Some(choice),
        depth: 0,
    })
}

/// A synthetic input: `label` names the field being filled, `choice` is the variant of the
/// next enum (only the outermost one gets a choice).
struct Sample {
    label: String,
    choice: Option<u32>,
    depth: u32,
}

impl Sample {
    fn child(&self, label: String) -> Sample {
        Sample {
            label,
            choice: None,
            depth: self.depth + 1,
        }
    }

    /// A small number that depends only on the label.
    fn number(&self) -> u8 {
        let sum = self.label.bytes().fold(7u32, |acc, b| {
            acc.wrapping_mul(31).wrapping_add(u32::from(b))
        });
        (sum % 97) as u8 + 1
    }
}

macro_rules! sample_numbers {
    ($($method:ident $visit:ident $ty:ty;)*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
            visitor.$visit(self.number() as $ty)
        }
    )*};
}

impl<'de> de::Deserializer<'de> for Sample {
    type Error = SampleError;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value> {
        Err(SampleError(format!(
            "{}: self-describing input is not sampled",
            self.label
        )))
    }

    sample_numbers! {
        deserialize_u8 visit_u8 u8; deserialize_u16 visit_u16 u16;
        deserialize_u32 visit_u32 u32; deserialize_u64 visit_u64 u64;
        deserialize_u128 visit_u128 u128; deserialize_i8 visit_i8 i8;
        deserialize_i16 visit_i16 i16; deserialize_i32 visit_i32 i32;
        deserialize_i64 visit_i64 i64; deserialize_i128 visit_i128 i128;
        deserialize_f32 visit_f32 f32; deserialize_f64 visit_f64 f64;
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        visitor.visit_bool(true)
    }

    fn deserialize_char<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        visitor.visit_char('c')
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        visitor.visit_string(self.label)
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        visitor.visit_string(self.label)
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        visitor.visit_byte_buf(self.label.into_bytes())
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        visitor.visit_byte_buf(self.label.into_bytes())
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        visitor.visit_some(self)
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        visitor.visit_unit()
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(self, _: &str, visitor: V) -> Result<V::Value> {
        visitor.visit_unit()
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(self, _: &str, visitor: V) -> Result<V::Value> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        let count = usize::from(self.depth < DEPTH_MAX);
        let labels = (0..count).map(|_| self.label.clone()).collect();
        visitor.visit_seq(Fields::new(&self, labels))
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value> {
        let labels = (0..len).map(|i| format!("{}.{i}", self.label)).collect();
        visitor.visit_seq(Fields::new(&self, labels))
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _: &str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value> {
        self.deserialize_tuple(len, visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        let count = usize::from(self.depth < DEPTH_MAX);
        let labels = (0..count).map(|_| self.label.clone()).collect();
        visitor.visit_map(Fields::new(&self, labels))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        let labels = fields.iter().map(|f| f.to_string()).collect();
        visitor.visit_seq(Fields::new(&self, labels))
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &str,
        _: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        visitor.visit_enum(self)
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, _: V) -> Result<V::Value> {
        Err(SampleError(format!(
            "{}: identifiers are not sampled",
            self.label
        )))
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        visitor.visit_unit()
    }

    fn is_human_readable(&self) -> bool {
        false
    }
}

impl<'de> de::EnumAccess<'de> for Sample {
    type Error = SampleError;
    type Variant = Sample;

    fn variant_seed<S: DeserializeSeed<'de>>(self, seed: S) -> Result<(S::Value, Sample)> {
        let choice = self.choice.unwrap_or(0);
        let value = seed.deserialize(IntoDeserializer::<SampleError>::into_deserializer(choice))?;
        Ok((value, self.child(self.label.clone())))
    }
}

impl<'de> de::VariantAccess<'de> for Sample {
    type Error = SampleError;

    fn unit_variant(self) -> Result<()> {
        Ok(())
    }

    fn newtype_variant_seed<S: DeserializeSeed<'de>>(self, seed: S) -> Result<S::Value> {
        seed.deserialize(self)
    }

    fn tuple_variant<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value> {
        de::Deserializer::deserialize_tuple(self, len, visitor)
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        de::Deserializer::deserialize_struct(self, "", fields, visitor)
    }
}

/// The elements of a list, tuple, map or struct: one sample per label, in order.
struct Fields {
    labels: std::vec::IntoIter<String>,
    value_label: Option<String>,
    depth: u32,
}

impl Fields {
    fn new(parent: &Sample, labels: Vec<String>) -> Fields {
        Fields {
            labels: labels.into_iter(),
            value_label: None,
            depth: parent.depth + 1,
        }
    }

    fn sample(&self, label: String) -> Sample {
        Sample {
            label,
            choice: None,
            depth: self.depth,
        }
    }
}

impl<'de> de::SeqAccess<'de> for Fields {
    type Error = SampleError;

    fn next_element_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<Option<S::Value>> {
        match self.labels.next() {
            Some(label) => seed.deserialize(self.sample(label)).map(Some),
            None => Ok(None),
        }
    }
}

impl<'de> de::MapAccess<'de> for Fields {
    type Error = SampleError;

    fn next_key_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<Option<S::Value>> {
        match self.labels.next() {
            Some(label) => {
                self.value_label = Some(format!("{label}.value"));
                seed.deserialize(self.sample(format!("{label}.key")))
                    .map(Some)
            }
            None => Ok(None),
        }
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value> {
        let label = self.value_label.take().unwrap_or_default();
        seed.deserialize(self.sample(label))
    }
}
