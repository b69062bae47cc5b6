//! Abnormal endings, chosen by the first argument:
//!   panic        -> an ordinary panic: message on stderr, then (wasm32-wasip1 is panic=abort)
//!                   the process aborts with a wasm `unreachable` trap
//!   panic-exit   -> a panic hook prints the message and calls exit(101), as a native panic would
//!   exit N       -> prints a line, then std::process::exit(N) (default 3)
//!   anything else / nothing -> prints "ok" and returns 0
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("panic") => {
            println!("about to panic");
            let v: Vec<u32> = Vec::new();
            panic!("deliberate panic: vector has {} elements", v.len());
        }
        Some("panic-exit") => {
            std::panic::set_hook(Box::new(|info| {
                eprintln!("guest panicked: {info}");
                std::process::exit(101);
            }));
            println!("about to panic");
            panic!("deliberate panic with exit code 101");
        }
        Some("exit") => {
            let code: i32 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(3);
            println!("exiting with {code}");
            eprintln!("stderr: exit {code}");
            std::process::exit(code);
        }
        _ => println!("ok"),
    }
}
