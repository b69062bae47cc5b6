//! The descriptor and path calls of WASI preview1 (`fd_*`, `path_*`).

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;

use super::errno::*;
use super::fs::rights::{FD_READ, FD_WRITE};
use super::fs::{dirents, filestat, filetype, resolve, Fd};
use super::guest::GuestMemory;
use super::{arg, arg64, VmState};

/// Fails with `NOTCAPABLE` unless `fd` holds `right`.
fn require(st: &mut VmState, fd: u32, right: u64) -> Result<(), Errno> {
    let (base, _, _) = st.fds.rights(fd)?;
    if base & right == 0 {
        return Err(NOTCAPABLE);
    }
    Ok(())
}
use crate::vmm::Value;

fn io<T>(r: std::io::Result<T>) -> Result<T, Errno> {
    r.map_err(|e| from_io(&e))
}

/// The path argument at `(ptr, len)` resolved under directory descriptor `dirfd`.
fn path_at(
    st: &mut VmState,
    mem: &GuestMemory<'_>,
    dirfd: u32,
    ptr: u32,
    len: u32,
    follow: bool,
) -> Result<(std::path::PathBuf, std::path::PathBuf), Errno> {
    let (dir, root) = st.fds.dir(dirfd)?;
    let path = mem.string(ptr, len)?;
    Ok((resolve(&dir, &root, &path, follow)?, root))
}

fn write_fd(st: &mut VmState, fd: u32, data: &[u8], at: Option<u64>) -> Result<usize, Errno> {
    match st.fds.get(fd)? {
        Fd::Stdout => {
            st.out.stdout.extend_from_slice(data);
            Ok(data.len())
        }
        Fd::Stderr => {
            st.out.stderr.extend_from_slice(data);
            Ok(data.len())
        }
        Fd::File { file, append, .. } => match at {
            Some(off) => io(file.write_at(data, off)),
            None => {
                if *append {
                    io(file.seek(SeekFrom::End(0)))?;
                }
                io(file.write(data))
            }
        },
        Fd::Stdin => Err(BADF),
        Fd::Dir { .. } => Err(ISDIR),
    }
}

fn read_fd(st: &mut VmState, fd: u32, len: usize, at: Option<u64>) -> Result<Vec<u8>, Errno> {
    match st.fds.get(fd)? {
        Fd::Stdin => {
            if at.is_some() {
                return Err(SPIPE);
            }
            let end = (st.stdin_pos + len).min(st.stdin.len());
            let out = st.stdin[st.stdin_pos..end].to_vec();
            st.stdin_pos = end;
            Ok(out)
        }
        Fd::File { file, .. } => {
            let mut buf = vec![0u8; len];
            let n = match at {
                Some(off) => io(file.read_at(&mut buf, off))?,
                None => io(file.read(&mut buf))?,
            };
            buf.truncate(n);
            Ok(buf)
        }
        Fd::Dir { .. } => Err(ISDIR),
        _ => Err(BADF),
    }
}

fn fdstat(st: &mut VmState, mem: &mut GuestMemory<'_>, fd: u32, out: u32) -> Result<(), Errno> {
    let ty = match st.fds.get(fd)? {
        Fd::Stdin | Fd::Stdout | Fd::Stderr => 2u8,
        Fd::Dir { .. } => 3,
        Fd::File { file, .. } => filetype(&io(file.metadata())?),
    };
    let (base, inheriting, flags) = st.fds.rights(fd)?;
    let mut b = [0u8; 24];
    b[0] = ty;
    b[2..4].copy_from_slice(&flags.to_le_bytes());
    b[8..16].copy_from_slice(&base.to_le_bytes());
    b[16..24].copy_from_slice(&inheriting.to_le_bytes());
    mem.write(out, &b)
}

fn set_times(
    path_or_file: Result<&File, &std::path::Path>,
    atim: u64,
    mtim: u64,
    flags: u32,
) -> Result<(), Errno> {
    const ATIM: u32 = 1;
    const ATIM_NOW: u32 = 2;
    const MTIM: u32 = 4;
    const MTIM_NOW: u32 = 8;
    if (flags & ATIM != 0 && flags & ATIM_NOW != 0) || (flags & MTIM != 0 && flags & MTIM_NOW != 0)
    {
        return Err(INVAL);
    }
    let at = |ns: u64| std::time::UNIX_EPOCH + std::time::Duration::from_nanos(ns);
    let mut times = std::fs::FileTimes::new();
    if flags & ATIM != 0 {
        times = times.set_accessed(at(atim));
    }
    if flags & ATIM_NOW != 0 {
        times = times.set_accessed(std::time::SystemTime::now());
    }
    if flags & MTIM != 0 {
        times = times.set_modified(at(mtim));
    }
    if flags & MTIM_NOW != 0 {
        times = times.set_modified(std::time::SystemTime::now());
    }
    match path_or_file {
        Ok(f) => io(f.set_times(times)),
        Err(p) => io(File::open(p).and_then(|f| f.set_times(times))),
    }
}

/// `fd_*` and `path_*` calls; the errno result is the function's return value.
pub fn fd_call(
    name: &str,
    st: &mut VmState,
    mem: &mut GuestMemory<'_>,
    a: &[Value],
) -> Result<(), Errno> {
    let fd = arg(a, 0);
    match name {
        "fd_write" | "fd_pwrite" => {
            require(st, fd, FD_WRITE)?;
            let iovs = mem.iovecs(arg(a, 1), arg(a, 2))?;
            let at = (name == "fd_pwrite").then(|| arg64(a, 3));
            let out = if name == "fd_pwrite" {
                arg(a, 4)
            } else {
                arg(a, 3)
            };
            let mut data = Vec::new();
            for (p, l) in iovs {
                data.extend(mem.read(p, l)?);
            }
            let n = write_fd(st, fd, &data, at)?;
            mem.set_u32(out, n as u32)
        }
        "fd_read" | "fd_pread" => {
            require(st, fd, FD_READ)?;
            let iovs = mem.iovecs(arg(a, 1), arg(a, 2))?;
            let mut at = (name == "fd_pread").then(|| arg64(a, 3));
            let out = if name == "fd_pread" {
                arg(a, 4)
            } else {
                arg(a, 3)
            };
            let mut total = 0u32;
            for (p, l) in iovs {
                let data = read_fd(st, fd, l as usize, at)?;
                mem.write(p, &data)?;
                total += data.len() as u32;
                if let Some(off) = at.as_mut() {
                    *off += data.len() as u64;
                }
                if (data.len() as u32) < l {
                    break;
                }
            }
            mem.set_u32(out, total)
        }
        "fd_close" => st.fds.close(fd),
        "fd_renumber" => st.fds.renumber(fd, arg(a, 1)),
        "fd_fdstat_get" => fdstat(st, mem, fd, arg(a, 1)),
        "fd_fdstat_set_flags" => {
            let flags = arg(a, 1) as u16;
            if let Fd::File { append, .. } = st.fds.get(fd)? {
                *append = flags & 1 != 0;
            }
            st.fds.set_flags(fd, flags)
        }
        "fd_fdstat_set_rights" => st.fds.set_rights(fd, arg64(a, 1), arg64(a, 2)),
        "fd_advise" => st.fds.get(fd).map(|_| ()),
        "fd_allocate" => match st.fds.get(fd)? {
            Fd::File { file, .. } => {
                let end = arg64(a, 1).saturating_add(arg64(a, 2));
                let len = io(file.metadata())?.len();
                if end > len {
                    io(file.set_len(end))?;
                }
                Ok(())
            }
            _ => Err(BADF),
        },
        "fd_sync" | "fd_datasync" => match st.fds.get(fd)? {
            Fd::File { file, .. } => io(file.sync_all()),
            _ => Ok(()),
        },
        "fd_seek" | "fd_tell" => {
            let (pos, out) = if name == "fd_tell" {
                (SeekFrom::Current(0), arg(a, 1))
            } else {
                let off = arg64(a, 1) as i64;
                let pos = match arg(a, 2) {
                    0 => SeekFrom::Start(u64::try_from(off).map_err(|_| INVAL)?),
                    1 => SeekFrom::Current(off),
                    2 => SeekFrom::End(off),
                    _ => return Err(INVAL),
                };
                (pos, arg(a, 3))
            };
            match st.fds.get(fd)? {
                Fd::File { file, .. } => {
                    let n = io(file.seek(pos))?;
                    mem.set_u64(out, n)
                }
                Fd::Dir { .. } => Err(BADF),
                _ => Err(SPIPE),
            }
        }
        "fd_filestat_get" => {
            let m = match st.fds.get(fd)? {
                Fd::File { file, .. } => io(file.metadata())?,
                Fd::Dir { host, .. } => io(std::fs::metadata(host))?,
                _ => {
                    let mut b = [0u8; 64];
                    b[16] = 2;
                    return mem.write(arg(a, 1), &b);
                }
            };
            mem.write(arg(a, 1), &filestat(&m))
        }
        "fd_filestat_set_size" => match st.fds.get(fd)? {
            Fd::File { file, .. } => io(file.set_len(arg64(a, 1))),
            _ => Err(BADF),
        },
        "fd_filestat_set_times" => match st.fds.get(fd)? {
            Fd::File { file, .. } => set_times(Ok(file), arg64(a, 1), arg64(a, 2), arg(a, 3)),
            Fd::Dir { host, .. } => {
                let host = host.clone();
                set_times(Err(&host), arg64(a, 1), arg64(a, 2), arg(a, 3))
            }
            _ => Err(BADF),
        },
        "fd_prestat_get" => match st.fds.get(fd)? {
            Fd::Dir {
                preopen: Some(name),
                ..
            } => {
                let len = name.len() as u32;
                mem.write(arg(a, 1), &[0, 0, 0, 0])?;
                mem.set_u32(arg(a, 1) + 4, len)
            }
            _ => Err(BADF),
        },
        "fd_prestat_dir_name" => match st.fds.get(fd)? {
            Fd::Dir {
                preopen: Some(name),
                ..
            } => {
                let bytes = name.as_bytes().to_vec();
                if (arg(a, 2) as usize) < bytes.len() {
                    return Err(NAMETOOLONG);
                }
                mem.write(arg(a, 1), &bytes)
            }
            _ => Err(BADF),
        },
        "fd_readdir" => {
            let (buf, len, cookie, used) = (arg(a, 1), arg(a, 2), arg64(a, 3), arg(a, 4));
            let dir = match st.fds.get(fd)? {
                Fd::Dir { host, .. } => host.clone(),
                _ => return Err(NOTDIR),
            };
            let mut out = Vec::new();
            for d in dirents(&dir)?.into_iter().skip(cookie as usize) {
                out.extend(d);
                if out.len() >= len as usize {
                    break;
                }
            }
            out.truncate(len as usize);
            mem.write(buf, &out)?;
            mem.set_u32(used, out.len() as u32)
        }
        _ => path_call(name, st, mem, a),
    }
}

/// A new link name may not end with `/` (POSIX: only directories take a trailing slash).
fn new_name_ok(
    mem: &GuestMemory<'_>,
    ptr: u32,
    len: u32,
    resolved: &std::path::Path,
) -> Result<(), Errno> {
    if mem.string(ptr, len)?.ends_with('/') {
        return Err(if std::fs::symlink_metadata(resolved).is_ok() {
            EXIST
        } else {
            NOENT
        });
    }
    Ok(())
}

fn path_call(
    name: &str,
    st: &mut VmState,
    mem: &mut GuestMemory<'_>,
    a: &[Value],
) -> Result<(), Errno> {
    let fd = arg(a, 0);
    match name {
        "path_open" => {
            let follow = arg(a, 1) & 1 != 0;
            let (path, root) = path_at(st, mem, fd, arg(a, 2), arg(a, 3), follow)?;
            let oflags = arg(a, 4);
            let rights = arg64(a, 5);
            let inheriting = arg64(a, 6);
            let fdflags = arg(a, 7);
            let (creat, directory, excl, trunc) = (
                oflags & 1 != 0,
                oflags & 2 != 0,
                oflags & 4 != 0,
                oflags & 8 != 0,
            );
            const PATH_CREATE_FILE: u64 = 1 << 10;
            const PATH_FILESTAT_SET_SIZE: u64 = 1 << 19;
            if creat {
                require(st, fd, PATH_CREATE_FILE)?;
            }
            if trunc {
                require(st, fd, PATH_FILESTAT_SET_SIZE)?;
            }
            let meta = if follow {
                std::fs::metadata(&path)
            } else {
                std::fs::symlink_metadata(&path)
            };
            if let Ok(m) = &meta {
                if creat && excl {
                    return Err(EXIST);
                }
                if m.file_type().is_symlink() {
                    return Err(LOOP);
                }
                if m.is_dir() {
                    if trunc || rights & super::fs::rights::FD_WRITE != 0 {
                        return Err(ISDIR);
                    }
                    let dir = Fd::Dir {
                        host: path,
                        preopen: None,
                        root,
                    };
                    let new = st.fds.insert(fd, dir, rights, inheriting, fdflags as u16)?;
                    return mem.set_u32(arg(a, 8), new);
                }
                if directory {
                    return Err(NOTDIR);
                }
            } else if directory && !creat {
                return Err(NOENT);
            }
            let append = fdflags & 1 != 0;
            // Rust's std refuses to create or truncate without write access, so creating
            // opens for writing too.
            let write = rights & FD_WRITE != 0 || trunc || creat;
            let read = rights & FD_READ != 0 || !(write || append);
            // Append is emulated (seek to the end before each write), so that
            // `fd_fdstat_set_flags` can turn it off again.
            let file = io(OpenOptions::new()
                .read(read)
                .write(write || append)
                .create(creat && !excl)
                .create_new(creat && excl)
                .truncate(trunc)
                .open(&path))?;
            let new = st.fds.insert(
                fd,
                Fd::File { file, append },
                rights,
                inheriting,
                fdflags as u16,
            )?;
            mem.set_u32(arg(a, 8), new)
        }
        "path_filestat_get" => {
            let (path, _) = path_at(st, mem, fd, arg(a, 2), arg(a, 3), arg(a, 1) & 1 != 0)?;
            let m = if arg(a, 1) & 1 != 0 {
                io(std::fs::metadata(&path))?
            } else {
                io(std::fs::symlink_metadata(&path))?
            };
            mem.write(arg(a, 4), &filestat(&m))
        }
        "path_filestat_set_times" => {
            let (path, _) = path_at(st, mem, fd, arg(a, 2), arg(a, 3), arg(a, 1) & 1 != 0)?;
            set_times(Err(&path), arg64(a, 4), arg64(a, 5), arg(a, 6))
        }
        "path_create_directory" => {
            let (path, _) = path_at(st, mem, fd, arg(a, 1), arg(a, 2), false)?;
            io(std::fs::create_dir(path))
        }
        "path_remove_directory" => {
            let (path, _) = path_at(st, mem, fd, arg(a, 1), arg(a, 2), false)?;
            io(std::fs::remove_dir(path))
        }
        "path_unlink_file" => {
            let (path, _) = path_at(st, mem, fd, arg(a, 1), arg(a, 2), false)?;
            io(std::fs::remove_file(path))
        }
        "path_rename" => {
            let (from, _) = path_at(st, mem, fd, arg(a, 1), arg(a, 2), false)?;
            let (to, _) = path_at(st, mem, arg(a, 3), arg(a, 4), arg(a, 5), false)?;
            io(std::fs::rename(from, to))
        }
        "path_link" => {
            let (from, _) = path_at(st, mem, fd, arg(a, 2), arg(a, 3), arg(a, 1) & 1 != 0)?;
            let (to, _) = path_at(st, mem, arg(a, 4), arg(a, 5), arg(a, 6), false)?;
            new_name_ok(mem, arg(a, 5), arg(a, 6), &to)?;
            io(std::fs::hard_link(from, to))
        }
        "path_symlink" => {
            let target = mem.string(arg(a, 0), arg(a, 1))?;
            if target.starts_with('/') {
                return Err(PERM);
            }
            let (at, _) = path_at(st, mem, arg(a, 2), arg(a, 3), arg(a, 4), false)?;
            new_name_ok(mem, arg(a, 3), arg(a, 4), &at)?;
            io(std::os::unix::fs::symlink(target, at))
        }
        "path_readlink" => {
            let (path, _) = path_at(st, mem, fd, arg(a, 1), arg(a, 2), false)?;
            let target = io(std::fs::read_link(path))?;
            let bytes = target.to_string_lossy().into_owned().into_bytes();
            let n = bytes.len().min(arg(a, 4) as usize);
            mem.write(arg(a, 3), &bytes[..n])?;
            mem.set_u32(arg(a, 5), n as u32)
        }
        _ => Err(NOSYS),
    }
}
