//! Safe filesystem wrappers over native operations: `statx` with options,
//! with a fallback for kernels without the opcode, and low-level directory
//! listing (`getdents64` on the blocking pool: io_uring has no opcode for
//! it).

pub use crate::fs::dirents::{read_dir_entries, DirEntry, DirEntryType};
pub use crate::fs::statx::{statx, statx_on_shard, statx_or_metadata, StatxMetadata, StatxOptions};
