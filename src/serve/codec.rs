//! The gRPC codec of `totoc serve`: prost, with every request message counted before prost builds it
//! ([`super::pbscan`]) and what its decode builds held from the request's bytes budget first. tonic creates a
//! codec per call with `Default`, so the request's ticket reaches the decoder through the task-local
//! [`super::hold::CALL`] that the gRPC front end sets around the call (the decode runs inside that call's future); a message decoded
//! outside one (tests) is only counted.

use std::marker::PhantomData;

use bytes::Buf;
use prost::Message;
use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder};
use tonic::Status;
use tonic_prost::{ProstCodec, ProstEncoder};

use super::hold::{Part, CALL};
use super::pbscan::Prescan;

/// A prost codec whose decoder counts first (see the module docs).
#[derive(Debug, Clone)]
pub struct BoundedCodec<T, U>(PhantomData<(T, U)>);

impl<T, U> Default for BoundedCodec<T, U> {
    fn default() -> Self {
        BoundedCodec(PhantomData)
    }
}

impl<T, U> Codec for BoundedCodec<T, U>
where
    T: Message + Send + 'static,
    U: Message + Default + Prescan + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = BoundedDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        ProstCodec::<T, U>::raw_encoder(BufferSettings::default())
    }

    fn decoder(&mut self) -> Self::Decoder {
        BoundedDecoder(PhantomData)
    }
}

/// Decodes `U` after [`Prescan`] counted it and the call's ticket held what it builds.
#[derive(Debug)]
pub struct BoundedDecoder<U>(PhantomData<U>);

impl<U: Message + Default + Prescan> Decoder for BoundedDecoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        // tonic hands over the whole message, contiguous (its buffer is one BytesMut); a copy otherwise.
        let whole = buf.remaining();
        if buf.chunk().len() == whole {
            self.hold::<U>(buf.chunk())?;
            U::decode(buf).map(Some).map_err(invalid)
        } else {
            let bytes = buf.copy_to_bytes(whole);
            self.hold::<U>(&bytes)?;
            U::decode(bytes).map(Some).map_err(invalid)
        }
    }
}

impl<U> BoundedDecoder<U> {
    /// Counts `message` and holds what decoding it builds from the call's ticket, if any.
    fn hold<M: Prescan>(&self, message: &[u8]) -> Result<(), Status> {
        let ticket = CALL.try_with(Option::clone).ok().flatten();
        let decoded = M::prescan(message).map_err(|e| {
            if let Some(t) = &ticket {
                t.reject("decode_limit");
            }
            Status::from(e)
        })?;
        if let Some(t) = ticket {
            t.hold(Part::Decoded, decoded).map_err(Status::from)?;
        }
        Ok(())
    }
}

fn invalid(e: prost::DecodeError) -> Status {
    Status::invalid_argument(format!("the message is not valid protobuf: {e}"))
}
