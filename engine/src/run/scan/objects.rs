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
use gix_object::Write as _;

use crate::git::GitError;
use crate::run::safe_fs;

/// A failure no repository content can cause (encoding in memory, or a SHA-1 collision
/// attack detected while hashing), for a person to read. What a repository can hold
/// (a damaged object, an object of the wrong kind, a file that cannot be written) is a
/// variant of its own that the command refuses with.
pub(super) fn store_error(what: &str, error: &dyn std::fmt::Display) -> GitError {
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
                .map_err(|e| GitError::ObjectUnwritable {
                    id: id.to_string(),
                    reason: e.to_string(),
                })?;
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
        self.record_tries(full, symlink, store, 3)
    }

    /// [`Objects::record`], reading a large file again (`tries` times in all) when it
    /// shrinks while being read.
    fn record_tries(
        &self,
        full: &Path,
        symlink: bool,
        store: bool,
        tries: u32,
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
                Ok(Some(Regular::Read(mode, data))) => (mode, data),
                Ok(Some(Regular::Large(_, _, size))) if size > RECORD_AT_MOST => {
                    return Err(GitError::FileTooLarge {
                        path: full.display().to_string(),
                        size,
                        limit: RECORD_AT_MOST,
                    });
                }
                Ok(Some(Regular::Large(mode, file, size))) => {
                    return match self.stream_blob(file, size, store) {
                        Ok(id) => Ok(Some((mode, id))),
                        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && tries > 1 => {
                            self.record_tries(full, symlink, store, tries - 1)
                        }
                        Err(e) => Err(safe_fs::io_error("read", full, e)),
                    };
                }
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

    /// The blob id of the `size` bytes of `file`, read in pieces, and the blob stored when
    /// `store` and the database lacks it. A file that ends before `size` bytes (it shrank
    /// while being read) is an error, and nothing is stored.
    fn stream_blob(
        &self,
        mut file: std::fs::File,
        size: u64,
        store: bool,
    ) -> std::io::Result<ObjectId> {
        let blob = gix_object::Kind::Blob;
        let mut hasher = gix_hash::hasher(self.kind);
        hasher.update(&gix_object::encode::loose_header(blob, size));
        let mut piece = vec![0; 1 << 16];
        let mut reader = Exactly::new(&mut file, size);
        loop {
            match reader.read(&mut piece) {
                Ok(0) => break,
                Ok(n) => hasher.update(&piece[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        let id = hasher.try_finalize().map_err(std::io::Error::other)?;
        if !store || self.loose.contains(&id) {
            return Ok(id);
        }
        std::io::Seek::rewind(&mut file)?;
        // The id of what was written: the file may have changed since it was hashed.
        self.loose
            .write_stream(blob, size, &mut Exactly::new(&mut file, size))
            .map_err(std::io::Error::other)
    }

    /// The contents of the blobs `ids`, in order, each checked against its id.
    pub(crate) fn read_blobs(&self, ids: &[&str]) -> Result<Vec<Vec<u8>>, GitError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut reader = self.reader()?;
        ids.iter()
            .map(|id| reader.read(id).map(<[u8]>::to_vec))
            .collect()
    }

    /// A reader of blobs one at a time, each checked against its id.
    pub(crate) fn reader(&self) -> Result<BlobReader, GitError> {
        Ok(BlobReader {
            odb: self.handle()?,
            buf: Vec::new(),
        })
    }

    /// The whole database (loose objects and packs), every object of which is checked
    /// against its id as it is read ([`Checked`]).
    pub(crate) fn handle(&self) -> Result<Checked, GitError> {
        let odb = gix_odb::at(&self.dir, self.kind)
            .map_err(|e| safe_fs::io_error("open the object database", &self.dir, e))?;
        Ok(Checked { odb })
    }

    /// The tree of the commit `id`, read and checked in process.
    pub(crate) fn tree_of_commit(&self, id: &gix_hash::oid) -> Result<ObjectId, GitError> {
        let odb = self.handle()?;
        let mut buf = Vec::new();
        let data = odb.find(id, &mut buf)?;
        if data.kind != gix_object::Kind::Commit {
            return Err(GitError::ObjectUnreadable {
                id: id.to_string(),
                reason: format!("it is a {}, not a commit", data.kind),
            });
        }
        gix_object::CommitRefIter::from_bytes(data.data, id.kind())
            .tree_id()
            .map_err(|e| GitError::ObjectUnreadable {
                id: id.to_string(),
                reason: format!("it is not a commit git can read: {e}"),
            })
    }

    /// Stores a tree object unless a loose copy is already there, and returns its id.
    pub(crate) fn write_tree(&self, tree: &gix_object::Tree) -> Result<ObjectId, GitError> {
        let mut data = Vec::new();
        gix_object::WriteTo::write_to(tree, &mut data)
            .map_err(|e| store_error("encode a tree", &e))?;
        self.write(gix_object::Kind::Tree, &data)
    }
}

/// The object database, read so that no object is used whose bytes are not its id's.
///
/// Every object is hashed as it is read and compared with the id it was asked for: a
/// loose object rewritten under another's name, an edited pack, or an alternate serving
/// other bytes under a name, is [`GitError::ObjectDamaged`], never data. Alternates can
/// therefore only ever supply the exact objects the ids name, and replacement refs and
/// grafts are not read at all (they belong to git's porcelain, not to the object store).
pub(crate) struct Checked {
    odb: gix_odb::Handle,
}

impl Checked {
    /// The object `id`, checked against its id; [`GitError::ObjectMissing`] when the
    /// database does not hold it.
    pub(crate) fn find<'a>(
        &self,
        id: &gix_hash::oid,
        buf: &'a mut Vec<u8>,
    ) -> Result<gix_object::Data<'a>, GitError> {
        self.checked(id, buf)?
            .ok_or_else(|| GitError::ObjectMissing { id: id.to_string() })
    }

    fn checked<'a>(
        &self,
        id: &gix_hash::oid,
        buf: &'a mut Vec<u8>,
    ) -> Result<Option<gix_object::Data<'a>>, GitError> {
        let Some(data) = gix_object::Find::try_find(&self.odb, id, buf).map_err(|e| {
            GitError::ObjectUnreadable {
                id: id.to_string(),
                reason: e.to_string(),
            }
        })?
        else {
            return Ok(None);
        };
        let found = gix_object::compute_hash(id.kind(), data.kind, data.data)
            .map_err(|e| store_error("hash an object", &e))?;
        if found != id {
            return Err(GitError::ObjectDamaged {
                id: id.to_string(),
                found: found.to_string(),
            });
        }
        Ok(Some(data))
    }
}

impl gix_object::Find for Checked {
    fn try_find<'a>(
        &self,
        id: &gix_hash::oid,
        buffer: &'a mut Vec<u8>,
    ) -> gix_error::Result<Option<gix_object::Data<'a>>> {
        self.checked(id, buffer)
            .map_err(gix_error::Error::from_error)
    }
}

/// Reads blobs one at a time, reusing one buffer, each checked against its id.
pub(crate) struct BlobReader {
    odb: Checked,
    buf: Vec<u8>,
}

impl BlobReader {
    /// The contents of the blob `id` (hex); an error when it is missing, damaged or not
    /// a blob.
    pub(crate) fn read(&mut self, id: &str) -> Result<&[u8], GitError> {
        let oid =
            ObjectId::from_hex(id.trim().as_bytes()).map_err(|_| GitError::ObjectMissing {
                id: id.trim().to_string(),
            })?;
        let data = self.odb.find(&oid, &mut self.buf)?;
        if data.kind != gix_object::Kind::Blob {
            return Err(GitError::ObjectUnreadable {
                id: id.to_string(),
                reason: format!("it is a {}, not a file", data.kind),
            });
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

/// The largest file recorded (1 GiB): one larger is refused from its size, never read.
/// Hashing runs at a few hundred MB/s, so a sparse file of a hundred GiB planted in the
/// work tree would otherwise hold a command for minutes.
pub(crate) const RECORD_AT_MOST: u64 = 1 << 30;

/// The most bytes of changed files one scan hashes (2 GiB): many files each under
/// [`RECORD_AT_MOST`] would otherwise hold a command as long as one huge file would.
pub(crate) const RECORD_ALL_AT_MOST: u64 = 2 << 30;

/// Files above this size are hashed and stored in pieces, never held whole in memory.
const READ_WHOLE_UP_TO: u64 = 16 << 20;

/// A regular file: its git mode and bytes, or, when it is large, the open file and its
/// size.
enum Regular {
    Read(u32, Vec<u8>),
    Large(u32, std::fs::File, u64),
}

/// Reads exactly `left` bytes of a stream: never more, and an error if it ends sooner.
struct Exactly<'a> {
    inner: &'a mut std::fs::File,
    left: u64,
}

impl<'a> Exactly<'a> {
    fn new(inner: &'a mut std::fs::File, size: u64) -> Exactly<'a> {
        Exactly { inner, left: size }
    }
}

impl Read for Exactly<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.left == 0 {
            return Ok(0);
        }
        let most = usize::try_from(self.left).map_or(buf.len(), |left| left.min(buf.len()));
        let n = self.inner.read(&mut buf[..most])?;
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the file shrank while it was being read",
            ));
        }
        self.left -= n as u64;
        Ok(n)
    }
}

/// The git mode and bytes (or, for a large file, the open file) of the regular file at
/// `full`, opened without following a symlink and without blocking on a FIFO; `None`
/// when something else is there now.
fn read_regular(full: &Path) -> std::io::Result<Option<Regular>> {
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
    if meta.len() > READ_WHOLE_UP_TO {
        return Ok(Some(Regular::Large(mode, file, meta.len())));
    }
    let mut data = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.read_to_end(&mut data)?;
    Ok(Some(Regular::Read(mode, data)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_file_is_hashed_and_stored_in_pieces_as_git_would() {
        let dir = tdd_testutil::repo();
        let path = dir.path().join("big.bin");
        let size = READ_WHOLE_UP_TO + 3;
        let data: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &data).expect("write");
        let objects = crate::run::scan::locate(dir.path())
            .expect("locate")
            .objects();
        let (mode, id) = objects
            .record(&path, false, false)
            .expect("record")
            .expect("a file");
        let by_git = tdd_testutil::git(dir.path(), &["hash-object", "big.bin"]);
        assert_eq!(
            (mode, id.to_string()),
            (0o100644, by_git.trim().to_string())
        );
        assert!(!objects.loose.contains(&id), "hashing alone stores nothing");
        let (_, stored) = objects
            .record(&path, false, true)
            .expect("store")
            .expect("a file");
        assert_eq!(stored, id);
        let read = std::process::Command::new("git")
            .current_dir(dir.path())
            .args(["cat-file", "blob", &id.to_string()])
            .output()
            .expect("cat-file");
        assert!(read.stdout == data, "git reads back the bytes written");
    }

    #[test]
    fn an_object_whose_bytes_are_not_its_ids_is_never_read() {
        let dir = tdd_testutil::repo();
        std::fs::write(dir.path().join("a"), b"honest\n").expect("write");
        std::fs::write(dir.path().join("b"), b"forged\n").expect("write");
        let ids = tdd_testutil::git(dir.path(), &["hash-object", "-w", "a", "b"]);
        let (a, b) = ids.trim().split_once('\n').expect("two ids");
        let objects = crate::run::scan::locate(dir.path())
            .expect("locate")
            .objects();
        assert_eq!(
            objects.read_blobs(&[a]).expect("read"),
            vec![b"honest\n".to_vec()]
        );
        let file = |id: &str| {
            dir.path()
                .join(".git/objects")
                .join(&id[..2])
                .join(&id[2..])
        };
        let forged = std::fs::read(file(b)).expect("forged");
        std::fs::set_permissions(file(a), std::fs::Permissions::from_mode(0o644)).expect("chmod");
        std::fs::write(file(a), forged).expect("rewrite");
        match objects.read_blobs(&[a]) {
            Err(GitError::ObjectDamaged { id, found }) => {
                assert_eq!((id.as_str(), found.as_str()), (a, b))
            }
            other => panic!("expected a damaged object, got {other:?}"),
        }
        // Truncated: no longer zlib, so it cannot be read at all.
        std::fs::write(file(a), b"x").expect("truncate");
        assert!(matches!(
            objects.read_blobs(&[a]),
            Err(GitError::ObjectUnreadable { id, .. }) if id == a
        ));
        std::fs::remove_file(file(a)).expect("remove");
        assert!(matches!(
            objects.read_blobs(&[a]),
            Err(GitError::ObjectMissing { id }) if id == a
        ));
    }

    #[test]
    fn a_stream_gives_exactly_its_size_and_fails_when_it_ends_sooner() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        std::fs::write(&path, b"0123456789").expect("write");
        let mut file = std::fs::File::open(&path).expect("open");
        let mut read = Vec::new();
        Exactly::new(&mut file, 4)
            .read_to_end(&mut read)
            .expect("read");
        assert_eq!(read, b"0123");
        let mut file = std::fs::File::open(&path).expect("open");
        let err = Exactly::new(&mut file, 11)
            .read_to_end(&mut Vec::new())
            .expect_err("the file is shorter");
        assert_eq!(err.kind(), std::io::ErrorKind::UnexpectedEof);
    }
}
