//! WASI preview1 error numbers, and the mapping from host I/O errors.

/// A WASI `errno`.
pub type Errno = u16;

/// No error.
pub const SUCCESS: Errno = 0;
/// Permission denied.
pub const ACCES: Errno = 2;
/// Resource unavailable, try again (a FIFO or device opened by the host without blocking).
pub const AGAIN: Errno = 6;
/// Bad file descriptor.
pub const BADF: Errno = 8;
/// File exists.
pub const EXIST: Errno = 20;
/// Bad address.
pub const FAULT: Errno = 21;
/// Illegal byte sequence.
pub const ILSEQ: Errno = 25;
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
/// Not enough space (a call asked the host to copy more than its per-call budget).
pub const NOMEM: Errno = 48;
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
/// Value too large to be stored in data type.
pub const OVERFLOW: Errno = 61;

/// Operation not permitted.
pub const PERM: Errno = 63;
/// Invalid seek.
pub const SPIPE: Errno = 70;
/// Device or resource busy.
pub const BUSY: Errno = 10;
/// File too large.
pub const FBIG: Errno = 22;
/// Too many links.
pub const MLINK: Errno = 34;
/// No space left on device.
pub const NOSPC: Errno = 51;
/// Broken pipe.
pub const PIPE: Errno = 64;
/// Cross-device link.
pub const XDEV: Errno = 75;
/// Capabilities insufficient (the path leaves the sandbox).
pub const NOTCAPABLE: Errno = 76;

/// The WASI errno for a host I/O error, mapped as wasmtime-wasi maps it (an error without an
/// OS code, such as cap-std's "a path led outside of the filesystem", goes by its kind:
/// permission denied is `PERM`).
pub fn from_io(e: &std::io::Error) -> Errno {
    match e.raw_os_error() {
        Some(1) => PERM,
        Some(2) => NOENT,
        Some(5) => IO,
        Some(9) => BADF,
        Some(11) => AGAIN,
        Some(12) => NOMEM,
        Some(13) => ACCES,
        Some(16) => BUSY,
        Some(17) => EXIST,
        Some(18) => XDEV,
        Some(20) => NOTDIR,
        Some(21) => ISDIR,
        Some(22) => INVAL,
        Some(27) => FBIG,
        Some(28) => NOSPC,
        Some(29) => SPIPE,
        Some(31) => MLINK,
        Some(32) => PIPE,
        Some(36) => NAMETOOLONG,
        Some(39) => NOTEMPTY,
        Some(40) => LOOP,
        Some(75) => OVERFLOW,
        Some(84) => ILSEQ,
        Some(95) => NOTSUP,
        Some(_) => IO,
        None => match e.kind() {
            std::io::ErrorKind::NotFound => NOENT,
            std::io::ErrorKind::PermissionDenied => PERM,
            std::io::ErrorKind::AlreadyExists => EXIST,
            std::io::ErrorKind::InvalidInput => INVAL,
            _ => IO,
        },
    }
}

/// How a WASI call that did not succeed ends: an errno returned to the guest, or a trap of
/// the calling VM (wasmtime traps on out-of-bounds or misaligned guest pointers and on some
/// oversized requests, rather than returning `FAULT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallError {
    /// The call returns this errno.
    Errno(Errno),
    /// The calling VM traps.
    Trap,
}

impl From<Errno> for CallError {
    fn from(e: Errno) -> Self {
        CallError::Errno(e)
    }
}

/// The result of a WASI call or of one of its steps.
pub type CallResult<T> = Result<T, CallError>;
