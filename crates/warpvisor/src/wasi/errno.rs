//! WASI preview1 error numbers, and the mapping from host I/O errors.

/// A WASI `errno`.
pub type Errno = u16;

/// No error.
pub const SUCCESS: Errno = 0;
/// Permission denied.
pub const ACCES: Errno = 2;
/// Bad file descriptor.
pub const BADF: Errno = 8;
/// File exists.
pub const EXIST: Errno = 20;
/// Bad address.
pub const FAULT: Errno = 21;
/// Invalid argument.
pub const INVAL: Errno = 28;
/// I/O error.
pub const IO: Errno = 29;
/// Is a directory.
pub const ISDIR: Errno = 31;
/// Too many levels of symbolic links.
pub const LOOP: Errno = 32;
/// Filename too long.
pub const NAMETOOLONG: Errno = 37;
/// No such file or directory.
pub const NOENT: Errno = 44;
/// Function not supported.
pub const NOSYS: Errno = 52;
/// Not a directory.
pub const NOTDIR: Errno = 54;
/// Directory not empty.
pub const NOTEMPTY: Errno = 55;
/// Not a socket.
pub const NOTSOCK: Errno = 57;
/// Not supported.
pub const NOTSUP: Errno = 58;
/// Illegal byte sequence.
pub const ILSEQ: Errno = 25;
/// Operation not permitted.
pub const PERM: Errno = 63;
/// Invalid seek.
pub const SPIPE: Errno = 70;
/// Cross-device link.
pub const XDEV: Errno = 75;
/// Capabilities insufficient (the path leaves the sandbox).
pub const NOTCAPABLE: Errno = 76;

/// The WASI errno for a host I/O error.
pub fn from_io(e: &std::io::Error) -> Errno {
    match e.raw_os_error() {
        Some(1) => PERM,
        Some(2) => NOENT,
        Some(9) => BADF,
        Some(13) => ACCES,
        Some(17) => EXIST,
        Some(18) => XDEV,
        Some(20) => NOTDIR,
        Some(21) => ISDIR,
        Some(22) => INVAL,
        Some(29) => SPIPE,
        Some(36) => NAMETOOLONG,
        Some(39) => NOTEMPTY,
        Some(40) => LOOP,
        Some(95) => NOTSUP,
        _ => match e.kind() {
            std::io::ErrorKind::NotFound => NOENT,
            std::io::ErrorKind::PermissionDenied => ACCES,
            std::io::ErrorKind::AlreadyExists => EXIST,
            std::io::ErrorKind::InvalidInput => INVAL,
            _ => IO,
        },
    }
}
