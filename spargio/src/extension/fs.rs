//! Safe filesystem wrappers over native operations: `statx` with options,
//! with a fallback for kernels without the opcode.

pub use crate::native::statx::{
    statx, statx_on_shard, statx_or_metadata, StatxMetadata, StatxOptions,
};
