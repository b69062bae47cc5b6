//! The benchmark programs of VectorVisor's evaluation (`vectorvisor.md` §4.1, Table 2), written
//! against the crates real programs use.
//!
//! Each [`Workload`] is one request handler, `fn(&[u8]) -> Result<Vec<u8>, WorkloadError>`, and
//! a seeded generator of its requests. The same handler is compiled twice:
//!
//! - into `src/bin/NAME.rs`, a `wasm32-wasip1` program that reads one request on stdin and
//!   writes the reply on stdout ([`serve`]): what warpvisor and wasmtime run
//!   (`guests/wasm/bench-NAME.wasm`);
//! - natively, linked into the benchmark runner (`warpvisor-bench`): the `native-x86` baseline.
//!
//! Replies depend only on the request, so every platform must produce the same bytes.

pub mod inputs;

pub mod bill_pdf;
pub mod blur;
pub mod histogram;
pub mod lz4;
pub mod password;
pub mod phash;
pub mod phash_modified;
pub mod strings;

use std::io::{Read, Write};
use std::process::ExitCode;

/// A request a handler cannot serve (malformed input), with what was wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct WorkloadError(pub String);

impl WorkloadError {
    /// An error naming what was wrong.
    pub fn new(what: impl Into<String>) -> Self {
        WorkloadError(what.into())
    }
}

/// A request handler: one request in, one reply out.
pub type Handler = fn(&[u8]) -> Result<Vec<u8>, WorkloadError>;

/// One benchmark.
#[derive(Clone, Copy)]
pub struct Workload {
    /// Short name: the guest is `guests/wasm/bench-NAME.wasm`, the program `src/bin/NAME.rs`.
    pub name: &'static str,
    /// The name the paper uses.
    pub title: &'static str,
    /// What one request does.
    pub summary: &'static str,
    /// One request, drawn from `rng`.
    pub request: fn(&mut inputs::Rng) -> Vec<u8>,
    /// The handler.
    pub run: Handler,
    /// 64 KiB pages one VM needs (the module's memory and what it grows to).
    pub memory_pages: u32,
}

impl std::fmt::Debug for Workload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workload")
            .field("name", &self.name)
            .finish()
    }
}

impl Workload {
    /// `count` requests for `seed`: the same seed always gives the same requests.
    pub fn requests(&self, seed: u64, count: usize) -> Vec<Vec<u8>> {
        let mut rng = inputs::rng(seed, self.name);
        (0..count).map(|_| (self.request)(&mut rng)).collect()
    }
}

/// The ten benchmarks, in the paper's order.
pub const WORKLOADS: [Workload; 10] = [
    Workload {
        name: "scrypt",
        title: "Scrypt",
        summary: "scrypt of an 80-byte block header, Litecoin parameters (N=1024, r=1, p=1)",
        request: password::scrypt_request,
        run: password::scrypt,
        memory_pages: 40,
    },
    Workload {
        name: "pbkdf2",
        title: "PBKDF2",
        summary: "Cisco type 8 password hash: PBKDF2-HMAC-SHA256, 20,000 iterations",
        request: password::pbkdf2_request,
        run: password::pbkdf2,
        memory_pages: 40,
    },
    Workload {
        name: "blur_jpeg",
        title: "Blur-JPEG",
        summary: "decode a 256x256 JPEG, Gaussian blur (sigma 2), encode JPEG",
        request: blur::jpeg_request,
        run: blur::blur_jpeg,
        memory_pages: 64,
    },
    Workload {
        name: "blur_bmp",
        title: "Blur-BMP",
        summary: "decode a 256x256 BMP, Gaussian blur (sigma 2), encode BMP",
        request: blur::bmp_request,
        run: blur::blur_bmp,
        memory_pages: 64,
    },
    Workload {
        name: "phash",
        title: "PHash",
        summary: "blockhash (image_hasher, 16x16) of a 200x200 PNG",
        request: phash::request,
        run: phash::run,
        memory_pages: 64,
    },
    Workload {
        name: "phash_modified",
        title: "PHash-Modified",
        summary: "blockhash of a 200x200 PNG, written to branch the same way in every VM",
        request: phash::request,
        run: phash_modified::run,
        memory_pages: 64,
    },
    Workload {
        name: "bill_pdf",
        title: "Bill-PDF",
        summary: "a one-page PDF bill of 25 items with a logo (pdf-writer, image, miniz_oxide)",
        request: bill_pdf::request,
        run: bill_pdf::run,
        memory_pages: 64,
    },
    Workload {
        name: "histogram",
        title: "Histogram",
        summary: "an HDR histogram (hdrhistogram) of 16,384 response times sent as text",
        request: histogram::request,
        run: histogram::run,
        memory_pages: 64,
    },
    Workload {
        name: "lz4",
        title: "LZ4",
        summary: "LZ4 block compression (lz4_flex) of 32 KiB of tweets",
        request: lz4::request,
        run: lz4::run,
        memory_pages: 64,
    },
    Workload {
        name: "strings",
        title: "Strings",
        summary: "tokenize 100 tweets, drop stop words, extract hashtags (JSON in and out)",
        request: strings::request,
        run: strings::run,
        memory_pages: 64,
    },
];

/// The benchmark called `name`.
pub fn find(name: &str) -> Option<&'static Workload> {
    WORKLOADS.iter().find(|w| w.name == name)
}

/// The `main` of every benchmark program: the request on stdin, the reply on stdout. A
/// malformed request gives its reason on stderr and exit code 1.
pub fn serve(run: Handler) -> ExitCode {
    let mut request = Vec::with_capacity(64 << 10);
    if let Err(e) = std::io::stdin().lock().read_to_end(&mut request) {
        eprintln!("reading the request: {e}");
        return ExitCode::from(2);
    }
    match run(&request) {
        Ok(reply) => {
            let mut out = std::io::stdout().lock();
            match out.write_all(&reply).and_then(|()| out.flush()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("writing the reply: {e}");
                    ExitCode::from(2)
                }
            }
        }
        Err(e) => {
            eprintln!("bad request: {e}");
            ExitCode::from(1)
        }
    }
}

/// The `main` of a benchmark program as a resident handler (`warpvisor serve`): request after
/// request in one VM, each answered 200 with its reply, or 400 with the reason a malformed
/// one was refused. Natively it answers one request from stdin, as [`serve`] does.
pub fn serve_resident(run: Handler) {
    warpvisor_guest::serve(|request| match run(request) {
        Ok(reply) => warpvisor_guest::Response::ok(reply),
        Err(e) => warpvisor_guest::Response::with_status(400, format!("bad request: {e}\n")),
    });
}

/// Lower-case hexadecimal of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_found() {
        for w in &WORKLOADS {
            assert_eq!(find(w.name).map(|f| f.name), Some(w.name));
        }
        let mut names: Vec<_> = WORKLOADS.iter().map(|w| w.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), WORKLOADS.len());
        assert!(find("nope").is_none());
    }

    #[test]
    fn requests_are_seeded() {
        for w in &WORKLOADS {
            let a = w.requests(7, 2);
            assert_eq!(a, w.requests(7, 2), "{}", w.name);
            assert_ne!(a[0], a[1], "{}: two requests are alike", w.name);
            assert_ne!(a, w.requests(8, 2), "{}: the seed changes nothing", w.name);
        }
    }

    #[test]
    fn every_workload_serves_its_requests_and_rejects_garbage() {
        for w in &WORKLOADS {
            for r in w.requests(1, 2) {
                let reply = (w.run)(&r).unwrap_or_else(|e| panic!("{}: {e}", w.name));
                assert!(!reply.is_empty(), "{}", w.name);
            }
            // LZ4 compresses any bytes; every other handler parses its request.
            if w.name != "lz4" {
                assert!(
                    (w.run)(b"\xff\x00garbage").is_err(),
                    "{} took garbage",
                    w.name
                );
            }
        }
    }
}
