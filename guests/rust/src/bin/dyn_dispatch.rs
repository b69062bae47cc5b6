//! Indirect calls: trait objects in a Vec<Box<dyn Trait>>, a table of fn pointers and boxed
//! closures. Argument: an integer seed (default 10).
use std::hint::black_box;

trait Shape {
    fn name(&self) -> String;
    fn area_milli(&self) -> i64; // area * 1000, integer so output is exact
    fn scale(&mut self, k: i64);
}
struct Rect { w: i64, h: i64 }
struct Square(i64);
struct Tri { b: i64, h: i64 }
impl Shape for Rect {
    fn name(&self) -> String { format!("rect {}x{}", self.w, self.h) }
    fn area_milli(&self) -> i64 { self.w * self.h * 1000 }
    fn scale(&mut self, k: i64) { self.w *= k; self.h *= k; }
}
impl Shape for Square {
    fn name(&self) -> String { format!("square {}", self.0) }
    fn area_milli(&self) -> i64 { self.0 * self.0 * 1000 }
    fn scale(&mut self, k: i64) { self.0 *= k; }
}
impl Shape for Tri {
    fn name(&self) -> String { format!("tri b={} h={}", self.b, self.h) }
    fn area_milli(&self) -> i64 { self.b * self.h * 500 }
    fn scale(&mut self, k: i64) { self.b *= k; self.h *= k; }
}

fn add(a: i64, b: i64) -> i64 { a + b }
fn sub(a: i64, b: i64) -> i64 { a - b }
fn mul(a: i64, b: i64) -> i64 { a.wrapping_mul(b) }
fn xor_shift(a: i64, b: i64) -> i64 { (a ^ b) << 3 }

fn main() {
    let seed: i64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(10);
    let mut shapes: Vec<Box<dyn Shape>> = Vec::new();
    for i in 0..6 {
        let k = seed + i;
        shapes.push(match i % 3 {
            0 => Box::new(Rect { w: k, h: k + 1 }),
            1 => Box::new(Square(k)),
            _ => Box::new(Tri { b: k, h: 2 * k + 1 }),
        });
    }
    for (i, s) in black_box(&mut shapes).iter_mut().enumerate() {
        let before = s.area_milli();
        s.scale(i as i64 % 3 + 1);
        println!("{}: area={}.{:03} scaled -> {} area={}", i, before / 1000, before % 1000, s.name(), s.area_milli() as f64 / 1000.0);
    }
    let total: i64 = shapes.iter().map(|s| s.area_milli()).sum();
    println!("total_area_milli={total}");

    let table: [(&str, fn(i64, i64) -> i64); 4] = [("add", add), ("sub", sub), ("mul", mul), ("xor_shift", xor_shift)];
    let mut acc = seed;
    for step in 0..12 {
        let (name, f) = table[black_box(step * 7 + seed as usize % 4) % table.len()];
        acc = f(acc, step as i64 + 3);
        println!("step {step:2}: {name:<9} -> {acc}");
    }

    let offset = seed * 3;
    let closures: Vec<Box<dyn Fn(i64) -> i64>> = vec![
        Box::new(move |x| x + offset),
        Box::new(|x| x * x),
        Box::new(move |x| if x % 2 == 0 { x / 2 } else { 3 * x + 1 }),
    ];
    let mut x = seed;
    let mut trace = Vec::new();
    for round in 0..9 {
        x = black_box(&closures)[round % closures.len()](x);
        trace.push(x);
    }
    println!("closures: {trace:?}");
    let composed = closures.iter().fold(seed, |v, f| f(v));
    println!("composed({seed}) = {composed}");
}
