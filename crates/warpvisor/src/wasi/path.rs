//! The path calls of WASI preview1 (`path_*`), confined beneath directory handles.
//!
//! Every path is resolved by `cap-primitives` beneath the open directory handle its descriptor
//! holds — `openat2(RESOLVE_BENEATH)` where the kernel has it, a checked component walk where
//! it does not — so no `..`, absolute path or symbolic link, whoever made it and whenever,
//! leads outside. Operations that must not follow a final symlink (`unlink`, `rmdir`,
//! `set_times` without the follow flag, ...) use the `*at` forms that don't. Files are opened
//! without blocking, so a FIFO or device the host left in a directory cannot stall the host.
//! Errors follow wasmtime-wasi, whose preview1 is the oracle: an escape attempt is `PERM`.

use std::path::Path;
use std::sync::Arc;

use cap_primitives::fs::{self as cap, FollowSymlinks, Metadata, OpenOptions};

use super::errno::*;
use super::fs::{filestat, rights, Fd};
use super::guest::GuestMemory;
use super::{arg, arg64, VmState};
use crate::vmm::Value;

/// The follow flag of a `lookupflags` argument.
fn follow(flags: u32) -> FollowSymlinks {
    FollowSymlinks::follow(flags & 1 != 0)
}

fn io<T>(r: std::io::Result<T>) -> Result<T, Errno> {
    r.map_err(|e| from_io(&e))
}

/// A new link name may not end with `/` (POSIX: only directories take a trailing slash).
fn new_name_ok(dir: &std::fs::File, name: &str) -> Result<(), Errno> {
    if name.ends_with('/') {
        return Err(
            match cap::stat(
                dir,
                Path::new(name.trim_end_matches('/')),
                FollowSymlinks::No,
            ) {
                Ok(_) => EXIST,
                Err(_) => NOENT,
            },
        );
    }
    Ok(())
}

/// The `(time, now)` halves of `fst_flags` for one timestamp, as a time to set.
fn time_spec(set: bool, now: bool, ns: u64) -> Result<Option<cap::SystemTimeSpec>, Errno> {
    match (set, now) {
        (true, true) => Err(INVAL),
        (true, false) => Ok(Some(cap::SystemTimeSpec::Absolute(
            cap_primitives::time::SystemTime::from_std(
                std::time::UNIX_EPOCH + std::time::Duration::from_nanos(ns),
            ),
        ))),
        (false, true) => Ok(Some(cap::SystemTimeSpec::SymbolicNow)),
        (false, false) => Ok(None),
    }
}

/// The access and modification times `fst_flags` asks for.
pub fn times(
    atim: u64,
    mtim: u64,
    flags: u32,
) -> Result<(Option<cap::SystemTimeSpec>, Option<cap::SystemTimeSpec>), Errno> {
    Ok((
        time_spec(flags & 1 != 0, flags & 2 != 0, atim)?,
        time_spec(flags & 4 != 0, flags & 8 != 0, mtim)?,
    ))
}

/// `path_open`: opens beneath the directory handle, without blocking on FIFOs or devices.
fn path_open(st: &mut VmState, mem: &mut GuestMemory<'_>, a: &[Value]) -> CallResult<()> {
    let fd = arg(a, 0);
    let path = mem.string(arg(a, 2), arg(a, 3))?;
    let (oflags, base, inheriting, fdflags) = (arg(a, 4), arg64(a, 5), arg64(a, 6), arg(a, 7));
    let (creat, directory, excl, trunc) = (
        oflags & 1 != 0,
        oflags & 2 != 0,
        oflags & 4 != 0,
        oflags & 8 != 0,
    );
    // Synchronous-write flags are not supported (wasmtime: NOTSUP).
    if fdflags & (2 | 8 | 16) != 0 {
        return Err(NOTSUP.into());
    }
    if directory && (creat || excl || trunc) {
        return Err(INVAL.into());
    }
    // Rights a guest narrowed on the directory (`fd_fdstat_set_rights`) bind it.
    if creat {
        st.fds.require(fd, rights::PATH_CREATE_FILE)?;
    }
    if trunc {
        st.fds.require(fd, rights::PATH_FILESTAT_SET_SIZE)?;
    }
    let mut opts = OpenOptions::new();
    let write = base & rights::FD_WRITE != 0 || creat || trunc;
    opts.read(base & rights::FD_READ != 0 || !write)
        .write(write)
        .create(creat && !excl)
        .create_new(creat && excl)
        .truncate(trunc)
        ._cap_fs_ext_follow(follow(arg(a, 1)))
        ._cap_fs_ext_maybe_dir(true)
        ._cap_fs_ext_nonblock(true);
    let opened = {
        let dir = st.fds.dir(fd)?;
        let file = io(cap::open(dir, Path::new(&path), &opts))?;
        let is_dir = io(Metadata::from_file(&file))?.is_dir();
        if directory && !is_dir {
            return Err(NOTDIR.into());
        }
        if is_dir {
            Fd::Dir {
                dir: Arc::new(file),
                preopen: None,
            }
        } else {
            Fd::File {
                file,
                append: fdflags & 1 != 0,
            }
        }
    };
    let new = st
        .fds
        .insert(fd, opened, base, inheriting, fdflags as u16)?;
    mem.set_u32(arg(a, 8), new)
}

/// The `path_*` calls; the errno result is the function's return value.
pub fn path_call(
    name: &str,
    st: &mut VmState,
    mem: &mut GuestMemory<'_>,
    a: &[Value],
) -> CallResult<()> {
    let fd = arg(a, 0);
    match name {
        "path_open" => path_open(st, mem, a),
        "path_filestat_get" => {
            let path = mem.string(arg(a, 2), arg(a, 3))?;
            let m = io(cap::stat(
                st.fds.dir(fd)?,
                Path::new(&path),
                follow(arg(a, 1)),
            ))?;
            mem.write_aligned(arg(a, 4), &filestat(&m), 8)
        }
        "path_filestat_set_times" => {
            let path = mem.string(arg(a, 2), arg(a, 3))?;
            let (atime, mtime) = times(arg64(a, 4), arg64(a, 5), arg(a, 6))?;
            let dir = st.fds.dir(fd)?;
            Ok(io(match follow(arg(a, 1)) {
                FollowSymlinks::Yes => cap::set_times(dir, Path::new(&path), atime, mtime),
                FollowSymlinks::No => cap::set_times_nofollow(dir, Path::new(&path), atime, mtime),
            })?)
        }
        "path_create_directory" => {
            let path = mem.string(arg(a, 1), arg(a, 2))?;
            let dir = st.fds.dir(fd)?;
            Ok(io(cap::create_dir(
                dir,
                Path::new(&path),
                &cap::DirOptions::new(),
            ))?)
        }
        "path_remove_directory" => {
            let path = mem.string(arg(a, 1), arg(a, 2))?;
            Ok(io(cap::remove_dir(st.fds.dir(fd)?, Path::new(&path)))?)
        }
        "path_unlink_file" => {
            let path = mem.string(arg(a, 1), arg(a, 2))?;
            Ok(io(cap::remove_file(st.fds.dir(fd)?, Path::new(&path)))?)
        }
        "path_rename" => {
            let from = mem.string(arg(a, 1), arg(a, 2))?;
            let to = mem.string(arg(a, 4), arg(a, 5))?;
            let (old_dir, new_dir) = (st.fds.dir(fd)?, st.fds.dir(arg(a, 3))?);
            Ok(io(cap::rename(
                old_dir,
                Path::new(&from),
                new_dir,
                Path::new(&to),
            ))?)
        }
        "path_link" => {
            let from = mem.string(arg(a, 2), arg(a, 3))?;
            let to = mem.string(arg(a, 5), arg(a, 6))?;
            let (old_dir, new_dir) = (st.fds.dir(fd)?, st.fds.dir(arg(a, 4))?);
            if arg(a, 1) & 1 != 0 {
                return Err(INVAL.into());
            }
            new_name_ok(new_dir, &to)?;
            Ok(io(cap::hard_link(
                old_dir,
                Path::new(&from),
                new_dir,
                Path::new(&to),
            ))?)
        }
        "path_symlink" => {
            let target = mem.string(arg(a, 0), arg(a, 1))?;
            let at = mem.string(arg(a, 3), arg(a, 4))?;
            let dir = st.fds.dir(arg(a, 2))?;
            new_name_ok(dir, &at)?;
            Ok(io(cap::symlink(Path::new(&target), dir, Path::new(&at)))?)
        }
        "path_readlink" => {
            let path = mem.string(arg(a, 1), arg(a, 2))?;
            let target = io(cap::read_link(st.fds.dir(fd)?, Path::new(&path)))?;
            let bytes = target.into_os_string().into_string().map_err(|_| ILSEQ)?;
            let bytes = bytes.as_bytes();
            let n = bytes.len().min(arg(a, 4) as usize);
            mem.write(arg(a, 3), &bytes[..n])?;
            mem.set_u32(arg(a, 5), n as u32)
        }
        _ => Err(NOSYS.into()),
    }
}
