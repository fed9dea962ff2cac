//! Git objects hashed, written and read in-process.
//!
//! Blobs are hashed from the bytes on disk exactly, with no filter of any kind, and
//! written as loose objects only when the object database does not hold them yet.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::path::PathBuf;

use gix_hash::ObjectId;
use gix_object::Find;
use gix_object::Write as _;

use crate::git::GitError;
use crate::run::safe_fs;

/// A failure of the in-process object store or index reader, for a person to read.
pub(crate) fn store_error(what: &str, error: &dyn std::fmt::Display) -> GitError {
    GitError::Failed {
        args: what.to_string(),
        stderr: error.to_string(),
    }
}

/// One repository's object database.
pub(crate) struct Objects {
    loose: gix_odb::loose::Store,
    dir: PathBuf,
    kind: gix_hash::Kind,
}

/// A file or symlink as git records it: mode and blob id.
pub(crate) type Recorded = (u32, ObjectId);

impl Objects {
    /// The object database in `objects_dir`, whose ids are of `kind`.
    pub(crate) fn at(objects_dir: &Path, kind: gix_hash::Kind) -> Objects {
        Objects {
            loose: gix_odb::loose::Store::at(objects_dir, kind),
            dir: objects_dir.to_path_buf(),
            kind,
        }
    }

    /// The id kind of this database.
    pub(crate) fn kind(&self) -> gix_hash::Kind {
        self.kind
    }

    /// The id `data` has as an object of `kind`.
    pub(crate) fn id_of(&self, kind: gix_object::Kind, data: &[u8]) -> Result<ObjectId, GitError> {
        gix_object::compute_hash(self.kind, kind, data)
            .map_err(|e| store_error("hash an object", &e))
    }

    /// Stores `data` as an object of `kind` unless a loose copy is already there, and
    /// returns its id. A packed copy may be duplicated loose; git tolerates that.
    pub(crate) fn write(&self, kind: gix_object::Kind, data: &[u8]) -> Result<ObjectId, GitError> {
        let id = self.id_of(kind, data)?;
        if !self.loose.contains(&id) {
            self.loose
                .write_buf_with_known_id(kind, data, id)
                .map_err(|e| store_error("write an object", &e))?;
        }
        Ok(id)
    }

    /// Records the file or symlink at `full` (which `lstat` showed as a symlink when
    /// `symlink`) as a blob: its bytes, or a symlink's target, with the git mode of what
    /// is there. `None` when it is neither any more, or is gone. With `store` false, only
    /// the id is computed.
    pub(crate) fn record(
        &self,
        full: &Path,
        symlink: bool,
        store: bool,
    ) -> Result<Option<Recorded>, GitError> {
        let (mode, data) = if symlink {
            match std::fs::read_link(full) {
                Ok(target) => (
                    safe_fs::MODE_SYMLINK,
                    std::os::unix::ffi::OsStrExt::as_bytes(target.as_os_str()).to_vec(),
                ),
                Err(e) if gone(&e) => return Ok(None),
                Err(e) => return Err(safe_fs::io_error("read the link", full, e)),
            }
        } else {
            match read_regular(full) {
                Ok(Some(found)) => found,
                Ok(None) => return Ok(None),
                Err(e) if gone(&e) => return Ok(None),
                Err(e) => return Err(safe_fs::io_error("read", full, e)),
            }
        };
        let id = if store {
            self.write(gix_object::Kind::Blob, &data)?
        } else {
            self.id_of(gix_object::Kind::Blob, &data)?
        };
        Ok(Some((mode, id)))
    }

    /// The contents of the blobs `ids`, in order, from loose objects, packs or alternates.
    pub(crate) fn read_blobs(&self, ids: &[&str]) -> Result<Vec<Vec<u8>>, GitError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut reader = self.reader()?;
        ids.iter()
            .map(|id| reader.read(id).map(<[u8]>::to_vec))
            .collect()
    }

    /// A reader of blobs one at a time, from loose objects, packs or alternates.
    pub(crate) fn reader(&self) -> Result<BlobReader, GitError> {
        Ok(BlobReader {
            odb: self.handle()?,
            buf: Vec::new(),
        })
    }

    /// A handle on the whole database, packs and alternates included.
    pub(crate) fn handle(&self) -> Result<gix_odb::Handle, GitError> {
        gix_odb::at(&self.dir, self.kind)
            .map_err(|e| safe_fs::io_error("open the object database", &self.dir, e))
    }

    /// Stores a tree object unless a loose copy is already there, and returns its id.
    pub(crate) fn write_tree(&self, tree: &gix_object::Tree) -> Result<ObjectId, GitError> {
        let mut data = Vec::new();
        gix_object::WriteTo::write_to(tree, &mut data)
            .map_err(|e| store_error("encode a tree", &e))?;
        self.write(gix_object::Kind::Tree, &data)
    }
}

/// Reads blobs one at a time, reusing one buffer.
pub(crate) struct BlobReader {
    odb: gix_odb::Handle,
    buf: Vec<u8>,
}

impl BlobReader {
    /// The contents of the blob `id` (hex); an error when it is missing or not a blob.
    pub(crate) fn read(&mut self, id: &str) -> Result<&[u8], GitError> {
        let oid = ObjectId::from_hex(id.trim().as_bytes())
            .map_err(|e| store_error("read an object id", &e))?;
        let data = self
            .odb
            .try_find(&oid, &mut self.buf)
            .map_err(|e| store_error("read an object", &e))?
            .ok_or_else(|| store_error("read an object", &format!("{id} is missing")))?;
        if data.kind != gix_object::Kind::Blob {
            return Err(store_error(
                "read a blob",
                &format!("{id} is a {}", data.kind),
            ));
        }
        Ok(data.data)
    }
}

fn gone(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
    ) || e.raw_os_error() == Some(libc_eloop())
}

/// `ELOOP`: what `open(O_NOFOLLOW)` says of a symlink put where a file was.
fn libc_eloop() -> i32 {
    nix::errno::Errno::ELOOP as i32
}

/// The git mode and bytes of the regular file at `full`, opened without following a
/// symlink and without blocking on a FIFO; `None` when something else is there now.
fn read_regular(full: &Path) -> std::io::Result<Option<(u32, Vec<u8>)>> {
    let mut file = std::fs::File::options()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(full)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Ok(None);
    }
    let mode = if meta.permissions().mode() & 0o100 != 0 {
        safe_fs::MODE_EXECUTABLE
    } else {
        0o100644
    };
    let mut data = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.read_to_end(&mut data)?;
    Ok(Some((mode, data)))
}
