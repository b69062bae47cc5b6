//! The descriptor table of one VM.
//!
//! A directory descriptor is an open host directory handle, never a host path: every path
//! operation resolves beneath its handle with the kernel's help (`path.rs`), so renaming,
//! deleting or replacing the directory by a symlink — by the guest, the host or a racing
//! process — cannot lead a later operation outside it.

use std::fs::File;
use std::sync::Arc;

use cap_primitives::fs::Metadata;

use super::errno::*;

/// What a descriptor refers to.
#[derive(Debug)]
pub enum Fd {
    /// Standard input (the job's stdin bytes).
    Stdin,
    /// Standard output (captured).
    Stdout,
    /// Standard error (captured).
    Stderr,
    /// A directory; `preopen` holds the guest path of a preopened one.
    Dir {
        /// The open host directory (shared by every VM for a preopened one).
        dir: Arc<File>,
        /// Guest name of a preopened directory.
        preopen: Option<String>,
    },
    /// An open file.
    File {
        /// The file.
        file: File,
        /// Writes go to the end.
        append: bool,
    },
}

/// WASI rights bits used by the table.
pub mod rights {
    /// `fd_read`.
    pub const FD_READ: u64 = 1 << 1;
    /// `fd_write`.
    pub const FD_WRITE: u64 = 1 << 6;
    /// `path_open` with `O_CREAT`.
    pub const PATH_CREATE_FILE: u64 = 1 << 10;
    /// `path_open` with `O_TRUNC`.
    pub const PATH_FILESTAT_SET_SIZE: u64 = 1 << 19;
    /// What a directory may do (no reading, writing, seeking or resizing).
    pub const DIR: u64 =
        (1 << 0) | (1 << 3) | (1 << 4) | (1 << 7) | (0x1fff << 9) | (0x1f << 23) & !(1 << 22);
    /// What a regular file may do.
    pub const FILE: u64 = (1 << 0)
        | (1 << 1)
        | (1 << 2)
        | (1 << 3)
        | (1 << 4)
        | (1 << 5)
        | (1 << 6)
        | (1 << 7)
        | (1 << 8)
        | (1 << 21)
        | (1 << 22)
        | (1 << 23)
        | (1 << 27);
    /// Standard streams.
    pub const STDIO: u64 =
        (1 << 0) | (1 << 1) | (1 << 3) | (1 << 4) | (1 << 6) | (1 << 7) | (1 << 21) | (1 << 27);
}

/// A descriptor with its rights and flags.
#[derive(Debug)]
struct Entry {
    fd: Fd,
    base: u64,
    inheriting: u64,
    flags: u16,
    /// The guest narrowed the rights itself (`fd_fdstat_set_rights`): only then are they
    /// enforced. wasmtime ignores rights; a guest that drops one expects it to bind.
    narrowed: bool,
}

/// The descriptor table of one VM.
#[derive(Debug, Default)]
pub struct FdTable {
    fds: Vec<Option<Entry>>,
}

impl FdTable {
    /// stdin, stdout, stderr, then the preopened directories `(handle, guest name)`.
    pub fn new(preopens: &[(Arc<File>, String)]) -> Self {
        let stdio = |fd| {
            Some(Entry {
                fd,
                base: rights::STDIO,
                inheriting: 0,
                flags: 0,
                narrowed: false,
            })
        };
        let mut fds = vec![stdio(Fd::Stdin), stdio(Fd::Stdout), stdio(Fd::Stderr)];
        for (dir, guest) in preopens {
            fds.push(Some(Entry {
                fd: Fd::Dir {
                    dir: dir.clone(),
                    preopen: Some(guest.clone()),
                },
                base: rights::DIR,
                inheriting: rights::DIR | rights::FILE,
                flags: 0,
                narrowed: false,
            }));
        }
        FdTable { fds }
    }

    /// The descriptor `fd`.
    pub fn get(&mut self, fd: u32) -> Result<&mut Fd, Errno> {
        self.entry(fd).map(|e| &mut e.fd)
    }

    fn entry(&mut self, fd: u32) -> Result<&mut Entry, Errno> {
        self.fds
            .get_mut(fd as usize)
            .and_then(Option::as_mut)
            .ok_or(BADF)
    }

    /// `(base rights, inheriting rights, fdflags)` of `fd`.
    pub fn rights(&mut self, fd: u32) -> Result<(u64, u64, u16), Errno> {
        self.entry(fd).map(|e| (e.base, e.inheriting, e.flags))
    }

    /// Narrows the rights of `fd`; widening them is not allowed.
    pub fn set_rights(&mut self, fd: u32, base: u64, inheriting: u64) -> Result<(), Errno> {
        let e = self.entry(fd)?;
        if base & !e.base != 0 || inheriting & !e.inheriting != 0 {
            return Err(NOTCAPABLE);
        }
        e.base = base;
        e.inheriting = inheriting;
        e.narrowed = true;
        Ok(())
    }

    /// Fails with `NOTCAPABLE` if the guest narrowed `fd`'s rights and `right` is not among
    /// them.
    pub fn require(&mut self, fd: u32, right: u64) -> Result<(), Errno> {
        let e = self.entry(fd)?;
        if e.narrowed && e.base & right == 0 {
            return Err(NOTCAPABLE);
        }
        Ok(())
    }

    /// Records the fdflags of `fd`.
    pub fn set_flags(&mut self, fd: u32, flags: u16) -> Result<(), Errno> {
        self.entry(fd).map(|e| e.flags = flags)
    }

    /// Adds a descriptor opened from directory `dir` with the requested rights, reusing the
    /// lowest free number.
    pub fn insert(
        &mut self,
        dir: u32,
        fd: Fd,
        base: u64,
        inheriting: u64,
        flags: u16,
    ) -> Result<u32, Errno> {
        let (_, dir_inheriting, _) = self.rights(dir)?;
        let kind = if matches!(fd, Fd::Dir { .. }) {
            rights::DIR
        } else {
            rights::FILE
        };
        let entry = Entry {
            fd,
            base: base & dir_inheriting & kind,
            inheriting: inheriting & dir_inheriting,
            flags,
            narrowed: false,
        };
        Ok(match self.fds.iter().position(Option::is_none) {
            Some(i) => {
                self.fds[i] = Some(entry);
                i as u32
            }
            None => {
                self.fds.push(Some(entry));
                self.fds.len() as u32 - 1
            }
        })
    }

    /// Closes `fd`.
    pub fn close(&mut self, fd: u32) -> Result<(), Errno> {
        let slot = self.fds.get_mut(fd as usize).ok_or(BADF)?;
        slot.take().map(|_| ()).ok_or(BADF)
    }

    /// Moves `from` onto `to` (closing what `to` held).
    pub fn renumber(&mut self, from: u32, to: u32) -> Result<(), Errno> {
        self.entry(to)?;
        let f = self
            .fds
            .get_mut(from as usize)
            .and_then(Option::take)
            .ok_or(BADF)?;
        let slot = self.fds.get_mut(to as usize).ok_or(BADF)?;
        *slot = Some(f);
        Ok(())
    }

    /// The directory handle of `fd` (`NOTDIR` for a file, `BADF` for anything else, as
    /// wasmtime answers).
    pub fn dir(&self, fd: u32) -> Result<&File, Errno> {
        match self
            .fds
            .get(fd as usize)
            .and_then(Option::as_ref)
            .map(|e| &e.fd)
        {
            Some(Fd::Dir { dir, .. }) => Ok(dir),
            Some(Fd::File { .. }) => Err(NOTDIR),
            _ => Err(BADF),
        }
    }
}

/// WASI filetype of host metadata.
pub fn filetype(m: &Metadata) -> u8 {
    use cap_primitives::fs::FileTypeExt;
    let t = m.file_type();
    if t.is_dir() {
        3
    } else if t.is_symlink() {
        7
    } else if t.is_file() {
        4
    } else if t.is_char_device() {
        2
    } else if t.is_block_device() {
        1
    } else {
        0
    }
}

/// The 64-byte WASI `filestat` of host metadata.
pub fn filestat(m: &Metadata) -> [u8; 64] {
    use cap_primitives::fs::MetadataExt;
    let mut b = [0u8; 64];
    b[0..8].copy_from_slice(&m.dev().to_le_bytes());
    b[8..16].copy_from_slice(&m.ino().to_le_bytes());
    b[16] = filetype(m);
    b[24..32].copy_from_slice(&m.nlink().to_le_bytes());
    b[32..40].copy_from_slice(&m.len().to_le_bytes());
    let ns = |s: i64, n: i64| {
        (s as u64)
            .wrapping_mul(1_000_000_000)
            .wrapping_add(n as u64)
    };
    b[40..48].copy_from_slice(&ns(m.atime(), m.atime_nsec()).to_le_bytes());
    b[48..56].copy_from_slice(&ns(m.mtime(), m.mtime_nsec()).to_le_bytes());
    b[56..64].copy_from_slice(&ns(m.ctime(), m.ctime_nsec()).to_le_bytes());
    b
}

/// The entries of the open directory `dir` as WASI `dirent` records, `.` and `..` first, then
/// by name. Entries are read through the handle, never through a path.
pub fn dirents(dir: &File) -> Result<Vec<Vec<u8>>, Errno> {
    use cap_primitives::fs::MetadataExt;
    let me = Metadata::from_file(dir).map_err(|e| from_io(&e))?;
    let mut entries: Vec<(String, u64, u8)> = vec![
        (".".into(), me.ino(), 3),
        // wasmtime reports the directory's own inode for `..` too (it must not look above).
        ("..".into(), me.ino(), 3),
    ];
    let mut rest = Vec::new();
    for e in cap_primitives::fs::read_base_dir(dir).map_err(|e| from_io(&e))? {
        let e = e.map_err(|e| from_io(&e))?;
        let m = e.metadata().map_err(|e| from_io(&e))?;
        rest.push((
            e.file_name().to_string_lossy().into_owned(),
            m.ino(),
            filetype(&m),
        ));
    }
    rest.sort();
    entries.extend(rest);
    Ok(entries
        .iter()
        .enumerate()
        .map(|(i, (name, ino, ty))| {
            let mut d = Vec::with_capacity(24 + name.len());
            d.extend_from_slice(&(i as u64 + 1).to_le_bytes());
            d.extend_from_slice(&ino.to_le_bytes());
            d.extend_from_slice(&(name.len() as u32).to_le_bytes());
            d.push(*ty);
            d.extend_from_slice(&[0, 0, 0]);
            d.extend_from_slice(name.as_bytes());
            d
        })
        .collect())
}
