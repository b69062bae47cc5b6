//! A `warpvisor serve` process on loopback and a minimal HTTP/1.1 client for it, shared by
//! the serving tests.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A `warpvisor serve` process.
pub struct Server {
    pub child: Child,
    pub addr: String,
    /// Its stderr lines so far.
    log: Arc<Mutex<Vec<String>>>,
}

impl Server {
    /// `warpvisor serve MODULE --backend BACKEND` on a free loopback port, with `extra` flags;
    /// returns once it listens.
    pub fn start_module(module: &Path, backend: &str, extra: &[&str]) -> Server {
        Self::start_with_env(module, backend, extra, &[])
    }

    /// [`Server::start_module`] with environment variables `env`.
    pub fn start_with_env(
        module: &Path,
        backend: &str,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_warpvisor"))
            .envs(env.iter().copied())
            .arg("serve")
            .arg(module)
            .args(["--backend", backend, "--listen", "127.0.0.1:0"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("warpvisor serve starts");
        let stderr = child.stderr.take().expect("stderr");
        let mut lines = BufReader::new(stderr).lines();
        let addr = loop {
            match lines.next() {
                Some(Ok(l)) => {
                    if let Some(rest) = l.split("listening on http://").nth(1) {
                        break rest
                            .split_whitespace()
                            .next()
                            .unwrap_or_default()
                            .to_string();
                    }
                }
                other => panic!("serve did not start: {other:?}"),
            }
        };
        // Keep reading stderr so the server never blocks on it.
        let log = Arc::new(Mutex::new(Vec::new()));
        let kept = log.clone();
        std::thread::spawn(move || {
            for l in lines.map_while(Result::ok) {
                kept.lock().unwrap_or_else(|p| p.into_inner()).push(l);
            }
        });
        Server { child, addr, log }
    }

    /// The stderr lines printed after the listening line, so far.
    pub fn log(&self) -> Vec<String> {
        self.log.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Sends one request; returns status, headers (lower-case names) and body.
    pub fn request(&self, method: &str, path: &str, body: &[u8], json: bool) -> Reply {
        let mut s = TcpStream::connect(&self.addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(120))).ok();
        let accept = if json {
            "Accept: application/json\r\n"
        } else {
            ""
        };
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\n{accept}Connection: close\r\n\r\n",
            self.addr,
            body.len()
        );
        s.write_all(head.as_bytes()).expect("write head");
        // The server may answer (413) before reading a large body and close.
        let _ = s.write_all(body);
        let mut raw = Vec::new();
        let _ = s.read_to_end(&mut raw);
        Reply::parse(&raw)
    }

    /// The value of the `/metrics` sample whose line starts with `sample` (name and labels),
    /// and the whole page for messages.
    pub fn metric(&self, sample: &str) -> (f64, String) {
        let page = self.request("GET", "/metrics", b"", false);
        let text = String::from_utf8_lossy(&page.body).into_owned();
        let value = text
            .lines()
            .find_map(|l| l.strip_prefix(sample)?.strip_prefix(' '))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no sample {sample} in\n{text}"));
        (value, text)
    }

    /// `POST /run` with `body`.
    pub fn post(&self, body: &[u8]) -> Reply {
        self.request("POST", "/run", body, false)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An HTTP reply.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn parse(raw: &[u8]) -> Reply {
        let split = raw
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .unwrap_or_else(|| panic!("no HTTP head in {:?}", String::from_utf8_lossy(raw)));
        let head = String::from_utf8_lossy(&raw[..split]).into_owned();
        let mut lines = head.lines();
        let status = lines
            .next()
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|s| s.parse().ok())
            .expect("status line");
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        let mut body = raw[split + 4..].to_vec();
        if headers
            .iter()
            .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"))
        {
            body = dechunk(&body);
        }
        Reply {
            status,
            headers,
            body,
        }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(end) = b.windows(2).position(|w| w == b"\r\n") else {
            return out;
        };
        let size =
            usize::from_str_radix(String::from_utf8_lossy(&b[..end]).trim(), 16).unwrap_or(0);
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&b[end + 2..end + 2 + size]);
        b = &b[end + 2 + size + 2..];
    }
}
