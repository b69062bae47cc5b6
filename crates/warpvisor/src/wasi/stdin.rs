//! A job's standard input: bytes held in memory, or a regular file that each VM reads from
//! its start.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use bytes::Bytes;

/// A job's standard input. Cloning shares it, so that a thousand VMs given the same input hold
/// one copy: bytes are reference-counted, and a file stays one open handle that each VM reads
/// at its own position (`pread`), as if each ran `prog < file` — the input crosses into the
/// VM's memory once, with no copy of the whole file on the host first.
#[derive(Clone)]
pub enum Stdin {
    /// These bytes.
    Bytes(Bytes),
    /// This regular file, read from offset 0 (its own offset is never used).
    File(Arc<File>),
}

impl Stdin {
    /// `file`'s contents, read as the VMs reach them. Only for regular files: anything else
    /// (a pipe, a terminal) cannot be read at an offset, so read it into [`Stdin::Bytes`].
    pub fn file(file: File) -> Stdin {
        Stdin::File(Arc::new(file))
    }

    /// Reads up to `buf.len()` bytes from offset `pos` into `buf`; 0 at the end.
    pub fn read_at(&self, pos: u64, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stdin::Bytes(_) => {
                let data = self.in_memory_at(pos, buf.len()).unwrap_or_default();
                buf[..data.len()].copy_from_slice(data);
                Ok(data.len())
            }
            Stdin::File(f) => loop {
                match f.read_at(buf, pos) {
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    r => return r,
                }
            },
        }
    }

    /// The whole input as bytes (a file is read now, from its start).
    pub fn to_bytes(&self) -> io::Result<Bytes> {
        match self {
            Stdin::Bytes(b) => Ok(b.clone()),
            Stdin::File(_) => {
                let mut out = Vec::new();
                let mut chunk = vec![0u8; 1 << 20];
                loop {
                    let n = self.read_at(out.len() as u64, &mut chunk)?;
                    if n == 0 {
                        return Ok(out.into());
                    }
                    out.extend_from_slice(&chunk[..n]);
                }
            }
        }
    }

    /// Up to `len` bytes from offset `pos`, when the input is held in memory (empty at the end).
    pub fn in_memory_at(&self, pos: u64, len: usize) -> Option<&[u8]> {
        let b = self.as_bytes()?;
        let start = usize::try_from(pos).map_or(b.len(), |p| p.min(b.len()));
        Some(&b[start..b.len().min(start.saturating_add(len))])
    }

    /// The bytes, when the input is held in memory.
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Stdin::Bytes(b) => Some(b),
            Stdin::File(_) => None,
        }
    }
}

impl Default for Stdin {
    fn default() -> Self {
        Stdin::Bytes(Bytes::new())
    }
}

impl std::fmt::Debug for Stdin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stdin::Bytes(b) => write!(f, "Stdin::Bytes({} bytes)", b.len()),
            Stdin::File(file) => write!(f, "Stdin::File({file:?})"),
        }
    }
}

/// Equal bytes, or the same open file.
impl PartialEq for Stdin {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Stdin::Bytes(a), Stdin::Bytes(b)) => a == b,
            (Stdin::File(a), Stdin::File(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl Eq for Stdin {}

impl From<Bytes> for Stdin {
    fn from(b: Bytes) -> Self {
        Stdin::Bytes(b)
    }
}

impl From<Vec<u8>> for Stdin {
    fn from(b: Vec<u8>) -> Self {
        Stdin::Bytes(b.into())
    }
}

impl From<&'static [u8]> for Stdin {
    fn from(b: &'static [u8]) -> Self {
        Stdin::Bytes(Bytes::from_static(b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn bytes_and_files_read_alike_at_every_offset() {
        let data: Vec<u8> = (0..5000u32).map(|i| (i * 7) as u8).collect();
        let path = std::env::temp_dir().join(format!("wv-stdin-{}", std::process::id()));
        File::create(&path)
            .and_then(|mut f| f.write_all(&data))
            .expect("temp file");
        let file = Stdin::file(File::open(&path).expect("opened"));
        let bytes = Stdin::from(data.clone());
        for pos in [0u64, 1, 4095, 4999, 5000, 9000] {
            let (mut a, mut b) = ([0u8; 300], [0u8; 300]);
            let n = bytes.read_at(pos, &mut a).expect("bytes read");
            assert_eq!(file.read_at(pos, &mut b).expect("file read"), n);
            assert_eq!(a[..n], b[..n]);
            let want = data.len().saturating_sub(pos as usize).min(300);
            assert_eq!(n, want, "at {pos}");
        }
        assert_eq!(file.to_bytes().expect("whole file"), data);
        assert_eq!(file, file.clone());
        assert_ne!(file, bytes);
        std::fs::remove_file(&path).ok();
    }
}
