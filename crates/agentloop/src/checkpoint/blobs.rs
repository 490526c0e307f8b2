//! The content-addressed blob store: each distinct file content once, at
//! `blobs/<first two hex digits>/<SHA-256 hex>`, written to a temporary name and renamed so a
//! reader never sees half a blob and two writers of the same content do not conflict.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};

use super::CheckpointError;

/// The blobs of one store.
#[derive(Clone, Debug)]
pub(crate) struct BlobStore {
    dir: PathBuf,
}

/// The SHA-256 of `bytes`, in lower-case hex.
pub(crate) fn hash_of(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(64);
    for byte in digest {
        out.push_str(&format!("{byte:02x}"));
    }
    out
}

fn valid_hash(hash: &str) -> bool {
    hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit())
}

impl BlobStore {
    /// The blobs under the store directory `store`.
    pub(crate) fn new(store: &Path) -> Self {
        BlobStore {
            dir: store.join("blobs"),
        }
    }

    fn path_of(&self, hash: &str) -> PathBuf {
        self.dir.join(&hash[..2]).join(hash)
    }

    /// Stores `bytes` (unless a blob with that content exists) and returns its hash.
    pub(crate) fn put(&self, bytes: &[u8]) -> Result<String, CheckpointError> {
        let hash = hash_of(bytes);
        let path = self.path_of(&hash);
        if path.exists() {
            return Ok(hash);
        }
        let parent = self.dir.join(&hash[..2]);
        std::fs::create_dir_all(&parent)
            .map_err(|e| CheckpointError::io(format!("cannot create {}", parent.display()), e))?;
        write_atomically(&path, bytes)?;
        Ok(hash)
    }

    /// The content of blob `hash`.
    pub(crate) fn read(&self, hash: &str) -> Result<Vec<u8>, CheckpointError> {
        if !valid_hash(hash) {
            return Err(CheckpointError::Corrupt {
                path: self.dir.display().to_string(),
                detail: format!("{hash:?} is not a blob hash"),
            });
        }
        let path = self.path_of(hash);
        let bytes = std::fs::read(&path)
            .map_err(|e| CheckpointError::io(format!("cannot read blob {}", path.display()), e))?;
        if hash_of(&bytes) != hash {
            return Err(CheckpointError::Corrupt {
                path: path.display().to_string(),
                detail: "the content does not match its hash".into(),
            });
        }
        Ok(bytes)
    }
}

/// Writes `bytes` to `path` through a temporary file beside it, renamed into place.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), CheckpointError> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".tmp-{}-{n}", std::process::id()));
    let tmp = path.with_file_name(name);
    // No fsync: a blob cut short by a crash fails its hash check when read.
    let written = std::fs::File::create(&tmp).and_then(|mut f| f.write_all(bytes));
    let renamed = written.and_then(|()| std::fs::rename(&tmp, path));
    renamed.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        CheckpointError::io(format!("cannot write {}", path.display()), e)
    })
}
