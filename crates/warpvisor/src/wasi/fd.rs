//! The descriptor calls of WASI preview1 (`fd_*`).
//!
//! Whether a descriptor may be read or written is the host's open mode, as in wasmtime (a
//! read-only file is `BADF` to a write); rights bits bind only once the guest narrowed them. Reads and writes move the first non-empty iovec only, as wasmtime-wasi does (a short
//! transfer that the guest's libc continues), so one call never copies more than one guest
//! buffer, and never more than [`super::guest::HOSTCALL_BUDGET`]. Captured stdout and stderr
//! stop at the job's output limit the way wasmtime's memory pipes do: the bytes that fit are
//! kept and the write fails with `IO`.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;

use cap_primitives::fs::Metadata;

use super::errno::*;
use super::fs::rights::{FD_READ, FD_WRITE};
use super::fs::{dirents, filestat, filetype, Fd};
use super::guest::GuestMemory;
use super::path::times;
use super::{arg, arg64, VmState};
use crate::vmm::Value;

fn io<T>(r: std::io::Result<T>) -> Result<T, Errno> {
    r.map_err(|e| from_io(&e))
}

/// Bytes a write to a file moves through the host at a time.
const FILE_CHUNK: usize = 64 << 10;

/// Appends the guest's bytes `[ptr, ptr + len)` to a captured stream holding at most `limit`
/// bytes, copying straight from guest memory: what fits is kept; past the limit the write
/// fails with `IO` (wasmtime's `MemoryOutputPipe`).
fn capture(
    stream: &mut Vec<u8>,
    mem: &mut GuestMemory<'_>,
    (ptr, len): (u32, u32),
    limit: usize,
) -> CallResult<usize> {
    let n = (len as usize).min(limit.saturating_sub(stream.len()));
    let old = stream.len();
    stream.resize(old + n, 0);
    mem.read_into(ptr, &mut stream[old..])?;
    if n < len as usize {
        return Err(IO.into());
    }
    Ok(n)
}

/// Writes the guest's bytes `[ptr, ptr + len)` to `file` (at `at`, or at its position), a
/// chunk at a time; a short write ends the call with what was written.
fn write_file(
    file: &mut File,
    mem: &mut GuestMemory<'_>,
    (ptr, len): (u32, u32),
    at: Option<u64>,
) -> CallResult<usize> {
    let mut chunk = vec![0u8; (len as usize).min(FILE_CHUNK)];
    let mut done = 0usize;
    while done < len as usize {
        let part = &mut chunk[..(len as usize - done).min(FILE_CHUNK)];
        mem.read_into(ptr + done as u32, part)?;
        let k = match at {
            Some(off) => io(file.write_at(part, off.checked_add(done as u64).ok_or(INVAL)?))?,
            None => io(file.write(part))?,
        };
        done += k;
        if k < part.len() {
            break;
        }
    }
    Ok(done)
}

fn write_fd(
    st: &mut VmState,
    fd: u32,
    mem: &mut GuestMemory<'_>,
    buf: (u32, u32),
    at: Option<u64>,
) -> CallResult<usize> {
    let limit = st.max_output;
    match st.fds.get(fd)? {
        Fd::Stdout | Fd::Stderr if at.is_some() => Err(SPIPE.into()),
        Fd::Stdout => capture(&mut st.out.stdout, mem, buf, limit),
        Fd::Stderr => capture(&mut st.out.stderr, mem, buf, limit),
        Fd::File { file, append, .. } => {
            if *append && at.is_none() {
                io(file.seek(SeekFrom::End(0)))?;
            }
            write_file(file, mem, buf, at)
        }
        Fd::Stdin | Fd::Dir { .. } => Err(BADF.into()),
    }
}

/// Reads at most `len` bytes of `fd` (at `at`, or at its position) into the guest at `ptr`;
/// standard input is copied straight from the job's bytes, a file through one host buffer.
fn read_fd(
    st: &mut VmState,
    fd: u32,
    mem: &mut GuestMemory<'_>,
    (ptr, len): (u32, usize),
    at: Option<u64>,
) -> CallResult<usize> {
    match st.fds.get(fd)? {
        Fd::Stdin => {
            if at.is_some() {
                return Err(SPIPE.into());
            }
            if let Some(data) = st.stdin.in_memory_at(st.stdin_pos, len) {
                mem.write(ptr, data)?;
                st.stdin_pos += data.len() as u64;
                return Ok(data.len());
            }
            // A file: through one chunk of host memory at a time, until `len` or its end (the
            // chunk is the only host copy: the file is never read whole).
            let mut chunk = vec![0u8; len.min(FILE_CHUNK)];
            let mut done = 0usize;
            while done < len {
                let part = &mut chunk[..(len - done).min(FILE_CHUNK)];
                let n = match st.stdin.read_at(st.stdin_pos, part) {
                    Ok(n) => n,
                    // What was read already is the call's result, as a short `read(2)`.
                    Err(_) if done > 0 => break,
                    Err(e) => return Err(from_io(&e).into()),
                };
                let at =
                    u32::try_from(u64::from(ptr) + done as u64).map_err(|_| CallError::Trap)?;
                mem.write(at, &part[..n])?;
                st.stdin_pos += n as u64;
                done += n;
                if n < part.len() {
                    break;
                }
            }
            Ok(done)
        }
        Fd::File { file, .. } => {
            // `len` is a checked, in-bounds guest buffer: no larger than the VM's memory.
            let mut buf = vec![0u8; len];
            let n = match at {
                Some(off) => io(file.read_at(&mut buf, off))?,
                None => io(file.read(&mut buf))?,
            };
            mem.write(ptr, &buf[..n])?;
            Ok(n)
        }
        _ => Err(BADF.into()),
    }
}

fn fdstat(st: &mut VmState, mem: &mut GuestMemory<'_>, fd: u32, out: u32) -> CallResult<()> {
    let ty = match st.fds.get(fd)? {
        Fd::Stdin | Fd::Stdout | Fd::Stderr => 2u8,
        Fd::Dir { .. } => 3,
        Fd::File { file, .. } => filetype(&io(Metadata::from_file(file))?),
    };
    let (base, inheriting, flags) = st.fds.rights(fd)?;
    let mut b = [0u8; 24];
    b[0] = ty;
    b[2..4].copy_from_slice(&flags.to_le_bytes());
    b[8..16].copy_from_slice(&base.to_le_bytes());
    b[16..24].copy_from_slice(&inheriting.to_le_bytes());
    mem.write_aligned(out, &b, 8)
}

/// The open host file behind `fd` (a file or a directory), for calls that work on either.
fn handle(st: &mut VmState, fd: u32) -> Result<Option<&File>, Errno> {
    Ok(match st.fds.get(fd)? {
        Fd::File { file, .. } => Some(file),
        Fd::Dir { dir, .. } => Some(dir),
        _ => None,
    })
}

/// `fd_write`/`fd_pwrite` and `fd_read`/`fd_pread`.
fn transfer(
    name: &str,
    st: &mut VmState,
    mem: &mut GuestMemory<'_>,
    a: &[Value],
) -> CallResult<()> {
    let fd = arg(a, 0);
    let positioned = matches!(name, "fd_pread" | "fd_pwrite");
    let at = positioned.then(|| arg64(a, 3));
    let out = if positioned { arg(a, 4) } else { arg(a, 3) };
    // The buffer is checked (bounds, budget) before the descriptor, as wasmtime does.
    let (ptr, len) = mem.first_iovec(arg(a, 1), arg(a, 2))?;
    let n = if matches!(name, "fd_write" | "fd_pwrite") {
        st.fds.require(fd, FD_WRITE)?;
        // The whole buffer must lie in memory (wasmtime checks it before writing).
        mem.check(ptr, len as u64, 1)?;
        write_fd(st, fd, mem, (ptr, len), at)?
    } else {
        st.fds.require(fd, FD_READ)?;
        // Never more than one byte past the end of memory: a read that would spill traps
        // all the same, without the host allocating what the guest cannot hold.
        let want = (len as u64).min(mem.room(ptr) + 1) as usize;
        read_fd(st, fd, mem, (ptr, want), at)?
    };
    mem.set_u32(out, n as u32)
}

/// `fd_*` calls; the errno result is the function's return value.
pub fn fd_call(
    name: &str,
    st: &mut VmState,
    mem: &mut GuestMemory<'_>,
    a: &[Value],
) -> CallResult<()> {
    let fd = arg(a, 0);
    match name {
        "fd_write" | "fd_pwrite" | "fd_read" | "fd_pread" => transfer(name, st, mem, a),
        "fd_close" => Ok(st.fds.close(fd)?),
        "fd_renumber" => Ok(st.fds.renumber(fd, arg(a, 1))?),
        "fd_fdstat_get" => fdstat(st, mem, fd, arg(a, 1)),
        "fd_fdstat_set_flags" => {
            let flags = arg(a, 1) as u16;
            if let Fd::File { append, .. } = st.fds.get(fd)? {
                *append = flags & 1 != 0;
            }
            Ok(st.fds.set_flags(fd, flags)?)
        }
        "fd_fdstat_set_rights" => Ok(st.fds.set_rights(fd, arg64(a, 1), arg64(a, 2))?),
        "fd_advise" => Ok(st.fds.get(fd).map(|_| ())?),
        "fd_allocate" => match st.fds.get(fd)? {
            Fd::File { file, .. } => {
                let end = arg64(a, 1).checked_add(arg64(a, 2)).ok_or(INVAL)?;
                let len = io(file.metadata())?.len();
                if end > len {
                    io(file.set_len(end))?;
                }
                Ok(())
            }
            _ => Err(BADF.into()),
        },
        "fd_sync" | "fd_datasync" => match st.fds.get(fd)? {
            Fd::File { file, .. } => Ok(io(file.sync_all())?),
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
                    _ => return Err(INVAL.into()),
                };
                (pos, arg(a, 3))
            };
            match st.fds.get(fd)? {
                Fd::File { file, .. } => {
                    let n = io(file.seek(pos))?;
                    mem.set_u64(out, n)
                }
                Fd::Dir { .. } => Err(BADF.into()),
                _ => Err(SPIPE.into()),
            }
        }
        "fd_filestat_get" => {
            let stat = match handle(st, fd)? {
                Some(f) => filestat(&io(Metadata::from_file(f))?),
                None => {
                    let mut b = [0u8; 64];
                    b[16] = 2;
                    b
                }
            };
            mem.write_aligned(arg(a, 1), &stat, 8)
        }
        "fd_filestat_set_size" => match st.fds.get(fd)? {
            Fd::File { file, .. } => Ok(io(file.set_len(arg64(a, 1)))?),
            _ => Err(BADF.into()),
        },
        "fd_filestat_set_times" => {
            let (atime, mtime) = times(arg64(a, 1), arg64(a, 2), arg(a, 3))?;
            match handle(st, fd)? {
                Some(f) => Ok(set_file_times(f, atime, mtime)?),
                None => Err(BADF.into()),
            }
        }
        "fd_prestat_get" => match st.fds.get(fd)? {
            Fd::Dir {
                preopen: Some(name),
                ..
            } => {
                let mut b = [0u8; 8];
                b[4..8].copy_from_slice(&(name.len() as u32).to_le_bytes());
                mem.write_aligned(arg(a, 1), &b, 4)
            }
            _ => Err(BADF.into()),
        },
        "fd_prestat_dir_name" => match st.fds.get(fd)? {
            Fd::Dir {
                preopen: Some(name),
                ..
            } => {
                let bytes = name.as_bytes().to_vec();
                if (arg(a, 2) as usize) < bytes.len() {
                    return Err(NAMETOOLONG.into());
                }
                mem.write(arg(a, 1), &bytes)
            }
            _ => Err(BADF.into()),
        },
        "fd_readdir" => {
            let (buf, len, cookie, used) = (arg(a, 1), arg(a, 2), arg64(a, 3), arg(a, 4));
            let entries = match st.fds.get(fd)? {
                Fd::Dir { dir, .. } => dirents(dir)?,
                _ => return Err(NOTDIR.into()),
            };
            // Only the bytes that fit in the guest's buffer are assembled.
            let mut out = Vec::new();
            for d in entries
                .into_iter()
                .skip(cookie.min(usize::MAX as u64) as usize)
            {
                if out.len() >= len as usize {
                    break;
                }
                out.extend(d);
            }
            out.truncate(len as usize);
            mem.write(buf, &out)?;
            mem.set_u32(used, out.len() as u32)
        }
        _ => super::path::path_call(name, st, mem, a),
    }
}

/// Sets the times of an open file or directory through its handle.
fn set_file_times(
    f: &File,
    atime: Option<cap_primitives::fs::SystemTimeSpec>,
    mtime: Option<cap_primitives::fs::SystemTimeSpec>,
) -> Result<(), Errno> {
    use cap_primitives::fs::SystemTimeSpec as T;
    let resolve = |t: T| match t {
        T::SymbolicNow => std::time::SystemTime::now(),
        T::Absolute(t) => t.into_std(),
    };
    let mut times = std::fs::FileTimes::new();
    if let Some(t) = atime {
        times = times.set_accessed(resolve(t));
    }
    if let Some(t) = mtime {
        times = times.set_modified(resolve(t));
    }
    io(f.set_times(times))
}
