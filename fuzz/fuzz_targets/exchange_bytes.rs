//! Pure noise: any bytes, split anyhow, with EOF and polls in any order, under every maximum
//! frame size. Must never panic, break the call protocol, or allocate what the wire says.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use stagger_fuzz::{config, drive_and_check, Op};

#[derive(Arbitrary, Debug)]
struct Input {
    max_frame: u8,
    ops: Vec<Op>,
}

fuzz_target!(|input: Input| {
    drive_and_check(&config(input.max_frame), &input.ops);
});
