//! The protobuf codec of every service: prost, except that a request that does not decode
//! is refused as `InvalidArgument` (bad input from a caller), not `Internal` (our fault).

use tonic::Status;
use tonic::codec::{Codec, DecodeBuf, Decoder};
use tonic_prost::{ProstCodec, ProstDecoder, ProstEncoder};

/// prost encoding with malformed input reported as `InvalidArgument`.
#[derive(Debug, Clone, Default)]
pub struct WhipCodec<T, U>(ProstCodec<T, U>);

impl<T, U> Codec for WhipCodec<T, U>
where
    T: prost::Message + Send + 'static,
    U: prost::Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = WhipDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        self.0.encoder()
    }

    fn decoder(&mut self) -> Self::Decoder {
        WhipDecoder(self.0.decoder())
    }
}

/// Decodes with prost; a decode failure becomes `InvalidArgument`.
#[derive(Debug)]
pub struct WhipDecoder<U>(ProstDecoder<U>);

impl<U: prost::Message + Default> Decoder for WhipDecoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        self.0.decode(src).map_err(|status| match status.code() {
            tonic::Code::Internal => {
                Status::invalid_argument(format!("malformed message: {}", status.message()))
            }
            _ => status,
        })
    }

    fn buffer_settings(&self) -> tonic::codec::BufferSettings {
        self.0.buffer_settings()
    }
}
