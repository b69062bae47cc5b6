//! Prints its arguments (without argv[0]) and two environment variables, then 10 numbered lines.
use std::env;

fn main() {
    let args: Vec<String> = env::args().skip(1).collect();
    let name = env::var("NAME").unwrap_or_else(|_| "world".to_string());
    let greeting = env::var("GREETING").unwrap_or_else(|_| "Hello".to_string());
    println!("{greeting}, {name}!");
    println!("argc={}", args.len());
    for (i, a) in args.iter().enumerate() {
        println!("arg[{i}]={a:?}");
    }
    for i in 1..=10 {
        println!("line {i:2}: {greeting} {name} x{}", i * i);
    }
}
