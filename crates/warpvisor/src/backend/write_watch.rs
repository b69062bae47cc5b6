//! Dirty pages found by the MMU instead of marked by the kernel (`DirtyPages::Auto` where Linux
//! offers it, for fleets in host memory: `cpu` with guard regions, OpenCL CPU devices such as
//! PoCL at interleave 0): a fleet's VM memories are registered with a userfaultfd
//! in asynchronous write-protect mode (`UFFD_FEATURE_WP_ASYNC`, Linux 6.7), so the first write
//! to a protected page is resolved inside the kernel — no signal, no `mprotect` — and leaves the
//! page "written"; `PAGEMAP_SCAN` on `/proc/self/pagemap` lists the written pages of a range.
//! The kernel's stores then carry no mark at all (`WV_DIRTY_BY_MMU` in the prelude).
//!
//! Before each reset the host scans every resetting VM's memory and puts the written pages into
//! the dirty-page map the reset kernel restores from. Pages are protected once — a VM's memory
//! at its first reset after instantiation, and pages a VM grew into at the reset after — and
//! not again: a page a run wrote stays writable and is restored at every reset (its VM is
//! likely to write it again; protecting it anew would cost a fault per page and batch, about
//! 1.7 µs here, more than restoring it). A populated page never protected reads as written
//! (unless it is the shared zero page, which no one wrote), so what the host has not protected
//! yet is restored; an unpopulated page reads as not written and holds zeros. That holds
//! because nothing discards guest pages: taking pages away at a reset is `mprotect`
//! (`guard::close`), which keeps their contents and their protection, never `madvise`.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::OnceLock;

/// `struct uffdio_api`.
#[repr(C)]
struct UffdioApi {
    api: u64,
    features: u64,
    ioctls: u64,
}

/// `struct uffdio_range`.
#[repr(C)]
#[derive(Clone, Copy)]
struct UffdioRange {
    start: u64,
    len: u64,
}

/// `struct uffdio_register`.
#[repr(C)]
struct UffdioRegister {
    range: UffdioRange,
    mode: u64,
    ioctls: u64,
}

/// `struct uffdio_writeprotect`.
#[repr(C)]
struct UffdioWriteprotect {
    range: UffdioRange,
    mode: u64,
}

/// `struct page_region`: `[start, end)` with the categories asked for.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct PageRegion {
    start: u64,
    end: u64,
    categories: u64,
}

/// `struct pm_scan_arg`.
#[repr(C)]
#[derive(Default)]
struct PmScanArg {
    size: u64,
    flags: u64,
    start: u64,
    end: u64,
    walk_end: u64,
    vec: u64,
    vec_len: u64,
    max_pages: u64,
    category_inverted: u64,
    category_mask: u64,
    category_anyof_mask: u64,
    return_mask: u64,
}

/// `_IOWR(ty, nr, size)` of Linux's generic ioctl encoding.
const fn iowr(ty: u8, nr: u8, size: usize) -> libc::Ioctl {
    ((3u32 << 30) | ((size as u32) << 16) | ((ty as u32) << 8) | nr as u32) as libc::Ioctl
}

const UFFD_API: u64 = 0xAA;
const UFFD_USER_MODE_ONLY: libc::c_int = 1;
const UFFD_FEATURE_WP_UNPOPULATED: u64 = 1 << 13;
const UFFD_FEATURE_WP_ASYNC: u64 = 1 << 15;
const UFFDIO_REGISTER_MODE_WP: u64 = 1 << 1;
const UFFDIO_WRITEPROTECT_MODE_WP: u64 = 1 << 0;
const UFFDIO_API: libc::Ioctl = iowr(0xAA, 0x3F, std::mem::size_of::<UffdioApi>());
const UFFDIO_REGISTER: libc::Ioctl = iowr(0xAA, 0x00, std::mem::size_of::<UffdioRegister>());
const UFFDIO_WRITEPROTECT: libc::Ioctl =
    iowr(0xAA, 0x06, std::mem::size_of::<UffdioWriteprotect>());
const PAGEMAP_SCAN: libc::Ioctl = iowr(b'f', 16, std::mem::size_of::<PmScanArg>());
const PAGE_IS_WRITTEN: u64 = 1 << 1;
const PAGE_IS_PFNZERO: u64 = 1 << 5;
/// Host page size the scan reports in (x86-64 Linux, the only host of guard regions); the
/// dirty-page map has a byte per such page.
const HOST_PAGE: u64 = 4096;

// The kernel's sizes of these structures (its UAPI), and the encoded numbers they give.
const _: () = assert!(std::mem::size_of::<UffdioApi>() == 24);
const _: () = assert!(std::mem::size_of::<UffdioRegister>() == 32);
const _: () = assert!(std::mem::size_of::<UffdioWriteprotect>() == 24);
const _: () = assert!(std::mem::size_of::<PmScanArg>() == 96);
const _: () = assert!(std::mem::size_of::<PageRegion>() == 24);
const _: () = assert!(PAGEMAP_SCAN as u32 == 0xC060_6610 && UFFDIO_API as u32 == 0xC018_AA3F);
const _: () = assert!(1u64 << crate::abi::DIRTY_PAGE_SHIFT == HOST_PAGE);
/// Regions one `PAGEMAP_SCAN` call may return; a longer answer takes more calls.
const REGIONS_PER_SCAN: usize = 512;

/// A fleet's write watch: its userfaultfd (the registration lives as long as it) and the
/// pagemap file scans go through.
pub(crate) struct WriteWatch {
    uffd: OwnedFd,
    pagemap: File,
    regions: Vec<PageRegion>,
}

/// Opens a userfaultfd with asynchronous write protection, in user mode only where this
/// process may not handle kernel faults (then a kernel write to a protected page — a `read`
/// into guest memory — is still resolved asynchronously).
fn open_uffd() -> io::Result<OwnedFd> {
    let flags = libc::O_CLOEXEC | libc::O_NONBLOCK;
    let mut last = io::Error::from(io::ErrorKind::Unsupported);
    for extra in [0, UFFD_USER_MODE_ONLY] {
        // SAFETY: userfaultfd takes flags and returns a new descriptor or -1.
        let fd = unsafe { libc::syscall(libc::SYS_userfaultfd, flags | extra) };
        if fd >= 0 {
            // SAFETY: `fd` was just opened and is owned by nothing else.
            let fd = unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) };
            let wanted = UFFD_FEATURE_WP_ASYNC | UFFD_FEATURE_WP_UNPOPULATED;
            let mut api = UffdioApi {
                api: UFFD_API,
                features: wanted,
                ioctls: 0,
            };
            // SAFETY: UFFDIO_API reads and writes a `struct uffdio_api`.
            if unsafe { libc::ioctl(fd.as_raw_fd(), UFFDIO_API, &mut api) } != 0 {
                return Err(io::Error::last_os_error());
            }
            if api.features & wanted != wanted {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    "no asynchronous write protection of unpopulated pages",
                ));
            }
            return Ok(fd);
        }
        last = io::Error::last_os_error();
    }
    Err(last)
}

impl WriteWatch {
    /// Whether this host can watch writes: the userfaultfd features and `PAGEMAP_SCAN`, tried
    /// once per process on a page of its own.
    pub(crate) fn available() -> bool {
        static AVAILABLE: OnceLock<bool> = OnceLock::new();
        *AVAILABLE.get_or_init(|| Self::probe().is_ok())
    }

    fn probe() -> io::Result<()> {
        let pages = Mapping::new(2)?;
        let mut watch = Self::new(pages.page(0), pages.len())?;
        // SAFETY: the mapping is ours and registered; the write and the map stay inside it.
        unsafe {
            watch.protect(pages.page(0), pages.len() as u64)?;
            *pages.page(1) = 1;
            let mut map = [0u8; 2];
            watch.written(pages.page(0), pages.len() as u64, map.as_mut_ptr())?;
            match map {
                [0, 1] => Ok(()),
                _ => Err(io::Error::other("the scan did not find the written page")),
            }
        }
    }

    /// Registers `[base, base + len)` (a whole reservation: registration is a property of the
    /// mapping and costs nothing per page) for write protection.
    pub(crate) fn new(base: *mut u8, len: usize) -> io::Result<Self> {
        let uffd = open_uffd()?;
        let mut register = UffdioRegister {
            range: UffdioRange {
                start: base as u64,
                len: len as u64,
            },
            mode: UFFDIO_REGISTER_MODE_WP,
            ioctls: 0,
        };
        // SAFETY: UFFDIO_REGISTER reads and writes a `struct uffdio_register`.
        if unsafe { libc::ioctl(uffd.as_raw_fd(), UFFDIO_REGISTER, &mut register) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(WriteWatch {
            uffd,
            pagemap: File::open("/proc/self/pagemap")?,
            regions: vec![PageRegion::default(); REGIONS_PER_SCAN],
        })
    }

    /// Write-protects `[start, start + len)`, populated or not: the next write to each page
    /// makes it written.
    ///
    /// # Safety
    /// The range lies in the registered reservation, page-aligned.
    pub(crate) unsafe fn protect(&self, start: *mut u8, len: u64) -> io::Result<()> {
        if len == 0 {
            return Ok(());
        }
        let mut wp = UffdioWriteprotect {
            range: UffdioRange {
                start: start as u64,
                len,
            },
            mode: UFFDIO_WRITEPROTECT_MODE_WP,
        };
        // SAFETY: UFFDIO_WRITEPROTECT reads a `struct uffdio_writeprotect`; the range is the
        // caller's.
        match unsafe { libc::ioctl(self.uffd.as_raw_fd(), UFFDIO_WRITEPROTECT, &mut wp) } {
            0 => Ok(()),
            _ => Err(io::Error::last_os_error()),
        }
    }

    /// Sets `map[p] = 1` for each page `p` of `[start, start + len)` written since it was
    /// protected (or never protected); leaves the other bytes as they are.
    ///
    /// # Safety
    /// The range is page-aligned and mapped; `map` has a byte per page of it.
    pub(crate) unsafe fn written(
        &mut self,
        start: *mut u8,
        len: u64,
        map: *mut u8,
    ) -> io::Result<()> {
        let (first, end) = (start as u64, start as u64 + len);
        let mut at = first;
        while at < end {
            let mut arg = PmScanArg {
                size: std::mem::size_of::<PmScanArg>() as u64,
                start: at,
                end,
                vec: self.regions.as_mut_ptr() as u64,
                vec_len: self.regions.len() as u64,
                // Written and not the shared zero page (a never-protected page only read).
                category_mask: PAGE_IS_WRITTEN | PAGE_IS_PFNZERO,
                category_inverted: PAGE_IS_PFNZERO,
                return_mask: PAGE_IS_WRITTEN,
                ..PmScanArg::default()
            };
            // SAFETY: PAGEMAP_SCAN reads the argument and writes at most `vec_len` regions
            // into `self.regions`.
            let n = unsafe { libc::ioctl(self.pagemap.as_raw_fd(), PAGEMAP_SCAN, &mut arg) };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            let found = self.regions.get(..n as usize).ok_or_else(|| {
                io::Error::other("the page scan returned more regions than asked for")
            })?;
            for r in found {
                if r.start < first || r.end > end || r.start > r.end {
                    return Err(io::Error::other(
                        "the page scan returned a region outside the range",
                    ));
                }
                let (lo, hi) = ((r.start - first) / HOST_PAGE, (r.end - first) / HOST_PAGE);
                // SAFETY: the region lies in the scanned range, whose pages `map` covers.
                unsafe { std::ptr::write_bytes(map.add(lo as usize), 1, (hi - lo) as usize) };
            }
            if arg.walk_end <= at {
                return Err(io::Error::other("the page scan made no progress"));
            }
            at = arg.walk_end;
        }
        Ok(())
    }
}

/// A fleet's write watch and how much of each VM's memory it protects (bytes from the VM's
/// start; what lies beyond is unprotected and so always counts as written).
pub(crate) struct FleetWatch {
    watch: WriteWatch,
    protected: Vec<u64>,
}

impl FleetWatch {
    /// Registers the memory buffer `[base, base + len)` of `num_vms` VMs; protects nothing yet
    /// (a VM's memory is protected at its first reset after instantiation, `protect_up_to`).
    pub(crate) fn new(base: *mut u8, len: usize, num_vms: u32) -> io::Result<Self> {
        Ok(FleetWatch {
            watch: WriteWatch::new(base, len)?,
            protected: vec![0; num_vms as usize],
        })
    }

    /// Sets in `map` (the dirty-page map of VM memory starting at `start`) the pages of its
    /// first `len` bytes written since they were protected, or never protected.
    ///
    /// # Safety
    /// `[start, start + len)` is page-aligned, accessible, in the registered buffer; `map`
    /// has a byte per page of it.
    pub(crate) unsafe fn collect(
        &mut self,
        start: *mut u8,
        len: u64,
        map: *mut u8,
    ) -> io::Result<()> {
        // SAFETY: the caller's contract.
        unsafe { self.watch.written(start, len, map) }
    }

    /// Protects VM `vm`'s memory (at `start`) up to `len` bytes from its start, where not yet
    /// protected: after a reset that restored those pages.
    ///
    /// # Safety
    /// `[start, start + len)` is page-aligned and lies in VM `vm`'s part of the registered
    /// buffer.
    pub(crate) unsafe fn protect_up_to(
        &mut self,
        vm: u32,
        start: *mut u8,
        len: u64,
    ) -> io::Result<()> {
        let Some(done) = self.protected.get_mut(vm as usize) else {
            return Ok(());
        };
        if len <= *done {
            return Ok(());
        }
        // SAFETY: the caller's contract; `*done < len`.
        unsafe { self.watch.protect(start.add(*done as usize), len - *done)? };
        *done = len;
        Ok(())
    }
}

/// An anonymous read-write mapping of whole host pages, unmapped on drop: the probe's and the
/// tests' memory, and the memory of OpenCL fleets a watch follows (`opencl/fleet.rs`). Pages
/// are reserved, not committed: they hold zeros until written.
pub(crate) struct Mapping(*mut u8, usize);

// SAFETY: the mapping is plain memory owned by this value; who writes it is the owner's
// business (an OpenCL buffer over it is used under the fleet's `&mut self`).
unsafe impl Send for Mapping {}

impl Mapping {
    /// `pages` host pages (at least one).
    pub(crate) fn new(pages: usize) -> io::Result<Self> {
        let len = pages.max(1) * HOST_PAGE as usize;
        // SAFETY: a fresh private anonymous mapping, checked below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        match p {
            libc::MAP_FAILED => Err(io::Error::last_os_error()),
            p => Ok(Mapping(p.cast(), len)),
        }
    }

    /// Host page `p`'s address (callers stay inside the mapping).
    pub(crate) fn page(&self, p: usize) -> *mut u8 {
        self.0.wrapping_add(p * HOST_PAGE as usize)
    }

    /// Its length in bytes, whole pages.
    pub(crate) fn len(&self) -> usize {
        self.1
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, no longer used.
        unsafe { libc::munmap(self.0.cast(), self.1) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(watch: &mut WriteWatch, m: &Mapping, pages: usize) -> Vec<u8> {
        let mut map = vec![0u8; pages];
        // SAFETY: the mapping is registered and has `pages` pages.
        unsafe { watch.written(m.0, (pages as u64) * HOST_PAGE, map.as_mut_ptr()) }.expect("scan");
        map
    }

    /// Protected pages read as written only once written (by a store, by the kernel on a
    /// `read` into them), stay written (no one protects them again here), pages only read stay
    /// clean, and an answer longer than the scan's buffer takes more calls.
    #[test]
    fn written_pages_and_only_those_are_found() {
        if !WriteWatch::available() {
            eprintln!("no asynchronous userfaultfd write protection on this host: skipped");
            return;
        }
        const PAGES: usize = 64;
        let m = Mapping::new(PAGES).expect("mapping");
        let mut watch = WriteWatch::new(m.0, m.1).expect("register");
        // Populated before protection: page 0 holds data, the rest were never touched.
        // SAFETY: inside the mapping.
        unsafe { *m.page(0) = 7 };
        assert_eq!(
            scan(&mut watch, &m, PAGES)[0],
            1,
            "unprotected and populated: written"
        );
        // SAFETY: the mapping is registered.
        unsafe { watch.protect(m.0, m.1 as u64) }.expect("protect");
        assert_eq!(scan(&mut watch, &m, PAGES), vec![0; PAGES]);
        // Every other page written (more regions than a call returns, below), page 1 read.
        for p in (2..PAGES).step_by(2) {
            // SAFETY: inside the mapping.
            unsafe { *m.page(p).add(100) = 1 };
        }
        // SAFETY: inside the mapping.
        let read = unsafe { std::ptr::read_volatile(m.page(1)) };
        assert_eq!(read, 0);
        // A write by the kernel into page 3.
        let mut fds = [0; 2];
        // SAFETY: a pipe; one byte through it into page 3.
        unsafe {
            assert_eq!(libc::pipe(fds.as_mut_ptr()), 0);
            assert_eq!(libc::write(fds[1], b"x".as_ptr().cast(), 1), 1);
            assert_eq!(libc::read(fds[0], m.page(3).cast(), 1), 1);
            libc::close(fds[0]);
            libc::close(fds[1]);
        }
        watch.regions.truncate(3);
        let expected: Vec<u8> = (0..PAGES)
            .map(|p| u8::from(p == 3 || (p >= 2 && p % 2 == 0)))
            .collect();
        assert_eq!(scan(&mut watch, &m, PAGES), expected);
        // Written pages stay written: the scan does not protect them again.
        assert_eq!(scan(&mut watch, &m, PAGES), expected);
    }
}
