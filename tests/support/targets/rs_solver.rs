// Test target: a Rust function in a module, driven by stdin ("step N", then "ok").
// Builds with the distribution's rustc (1.63) and newer ones.
use std::io::{self, BufRead, Write};

pub mod solver {
    #[inline(never)]
    pub fn step(x: u64) -> u64 {
        x.wrapping_mul(3) ^ (x >> 2)
    }
}

fn main() {
    let stdin = io::stdin();
    let mut out = io::stdout();
    writeln!(out, "ready").unwrap();
    out.flush().unwrap();
    for line in stdin.lock().lines() {
        let line = line.unwrap();
        let mut words = line.split_whitespace();
        match (words.next(), words.next().and_then(|n| n.parse::<u64>().ok())) {
            (Some("step"), Some(n)) => {
                let mut acc = 0u64;
                for i in 0..n {
                    acc = acc.wrapping_add(solver::step(i));
                }
                if acc == 42 {
                    eprintln!("{}", acc); // keeps the calls: their sum is used
                }
            }
            (Some("exit"), _) => return,
            _ => {}
        }
        writeln!(out, "ok").unwrap();
        out.flush().unwrap();
    }
}
