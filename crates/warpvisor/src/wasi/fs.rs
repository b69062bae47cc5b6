//! File descriptors and sandboxed paths of one VM.
//!
//! Every path a VM names is resolved component by component under one of its preopened
//! directories; `..` may not climb above it, absolute paths and symbolic links that point
//! outside it are refused with `NOTCAPABLE`. No VM reaches a file outside its directories.

use std::fs::File;
use std::path::{Path, PathBuf};

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
        /// Host path.
        host: PathBuf,
        /// Guest name of a preopened directory.
        preopen: Option<String>,
        /// The preopened root this directory lies in.
        root: PathBuf,
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
}

/// The descriptor table of one VM.
#[derive(Debug, Default)]
pub struct FdTable {
    fds: Vec<Option<Entry>>,
}

impl FdTable {
    /// stdin, stdout, stderr, then the preopened directories `(host, guest)`.
    pub fn new(preopens: &[(PathBuf, String)]) -> Self {
        let stdio = |fd| {
            Some(Entry {
                fd,
                base: rights::STDIO,
                inheriting: 0,
                flags: 0,
            })
        };
        let mut fds = vec![stdio(Fd::Stdin), stdio(Fd::Stdout), stdio(Fd::Stderr)];
        for (host, guest) in preopens {
            fds.push(Some(Entry {
                fd: Fd::Dir {
                    host: host.clone(),
                    preopen: Some(guest.clone()),
                    root: host.clone(),
                },
                base: rights::DIR,
                inheriting: rights::DIR | rights::FILE,
                flags: 0,
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
        self.fds[to as usize] = Some(f);
        Ok(())
    }

    /// The directory `fd` as (host path, sandbox root).
    pub fn dir(&mut self, fd: u32) -> Result<(PathBuf, PathBuf), Errno> {
        match self.get(fd)? {
            Fd::Dir { host, root, .. } => Ok((host.clone(), root.clone())),
            _ => Err(NOTDIR),
        }
    }
}

/// Resolves guest `path` relative to directory `dir` inside sandbox `root`. Symbolic links in
/// the middle are followed (within the sandbox); the last component only if `follow`.
pub fn resolve(dir: &Path, root: &Path, path: &str, follow: bool) -> Result<PathBuf, Errno> {
    if path.is_empty() {
        return Err(NOENT);
    }
    if path.starts_with('/') {
        return Err(NOTCAPABLE);
    }
    if path.contains('\0') {
        return Err(INVAL);
    }
    let rel = dir.strip_prefix(root).map_err(|_| NOTCAPABLE)?;
    // Components still to walk, and the walked prefix below the root.
    let mut pending: Vec<String> = path.split('/').rev().map(str::to_string).collect();
    let mut walked: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let mut links = 0;
    let trailing_slash = path.ends_with('/');
    while let Some(c) = pending.pop() {
        match c.as_str() {
            "" | "." => continue,
            ".." => {
                walked.pop().ok_or(NOTCAPABLE)?;
                continue;
            }
            _ => {}
        }
        let last = pending.iter().all(|p| p.is_empty() || p == ".");
        let candidate: PathBuf = walked
            .iter()
            .chain(std::iter::once(&c))
            .fold(root.to_path_buf(), |p, s| p.join(s));
        let is_link =
            std::fs::symlink_metadata(&candidate).is_ok_and(|m| m.file_type().is_symlink());
        if is_link && (!last || follow || trailing_slash) {
            links += 1;
            if links > 32 {
                return Err(LOOP);
            }
            let target = std::fs::read_link(&candidate).map_err(|e| from_io(&e))?;
            let target = target.to_string_lossy().into_owned();
            if target.starts_with('/') {
                return Err(NOTCAPABLE);
            }
            for t in target.split('/').rev() {
                pending.push(t.to_string());
            }
            continue;
        }
        walked.push(c);
    }
    let mut out = root.to_path_buf();
    for w in &walked {
        out.push(w);
    }
    if trailing_slash {
        // `name/` must be a directory.
        match std::fs::metadata(&out) {
            Ok(m) if !m.is_dir() => return Err(NOTDIR),
            _ => {}
        }
    }
    Ok(out)
}

/// WASI filetype of host metadata.
pub fn filetype(m: &std::fs::Metadata) -> u8 {
    let t = m.file_type();
    if t.is_dir() {
        3
    } else if t.is_symlink() {
        7
    } else if t.is_file() {
        4
    } else {
        use std::os::unix::fs::FileTypeExt;
        if t.is_char_device() {
            2
        } else if t.is_block_device() {
            1
        } else {
            0
        }
    }
}

/// The 64-byte WASI `filestat` of host metadata.
pub fn filestat(m: &std::fs::Metadata) -> [u8; 64] {
    use std::os::unix::fs::MetadataExt;
    let mut b = [0u8; 64];
    b[0..8].copy_from_slice(&m.dev().to_le_bytes());
    b[8..16].copy_from_slice(&m.ino().to_le_bytes());
    b[16] = filetype(m);
    b[24..32].copy_from_slice(&m.nlink().to_le_bytes());
    b[32..40].copy_from_slice(&m.size().to_le_bytes());
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

/// The entries of a directory as WASI `dirent` records, `.` and `..` first, then by name.
pub fn dirents(dir: &Path) -> Result<Vec<Vec<u8>>, Errno> {
    use std::os::unix::fs::MetadataExt;
    let mut entries: Vec<(String, u64, u8)> = Vec::new();
    let me = std::fs::metadata(dir).map_err(|e| from_io(&e))?;
    entries.push((".".into(), me.ino(), 3));
    let parent = std::fs::metadata(dir.join(".."))
        .map(|m| m.ino())
        .unwrap_or(0);
    entries.push(("..".into(), parent, 3));
    let mut rest = Vec::new();
    for e in std::fs::read_dir(dir).map_err(|e| from_io(&e))? {
        let e = e.map_err(|e| from_io(&e))?;
        let m = std::fs::symlink_metadata(e.path()).map_err(|e| from_io(&e))?;
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
