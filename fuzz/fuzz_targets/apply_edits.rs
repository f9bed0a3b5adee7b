//! `apply_edits`: any content and batch. Errors are consistent with the input; a success's
//! diff turns the old content into the new; a unique exact match is the exact level; one
//! more edit that matches nowhere fails the whole batch.
#![no_main]

use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use outrigger::tools::fs::edit::Edit;

#[path = "../oracles.rs"]
mod oracles;

#[derive(Arbitrary, Debug)]
enum Old {
    Text(String),
    /// A slice of the content, between two char boundaries picked by the numbers.
    Slice(u16, u16),
}

#[derive(Arbitrary, Debug)]
struct Input {
    content: String,
    edits: Vec<(Old, String)>,
    replace_all: bool,
}

fuzz_target!(|input: Input| {
    let content = input.content.as_str();
    let bounds: Vec<usize> = (0..=content.len())
        .filter(|&i| content.is_char_boundary(i))
        .collect();
    let edits: Vec<Edit> = input
        .edits
        .into_iter()
        .take(8)
        .map(|(old, new)| {
            let old_text = match old {
                Old::Text(t) => t,
                Old::Slice(a, b) => {
                    let i = bounds[usize::from(a) % bounds.len()];
                    let j = bounds[usize::from(b) % bounds.len()];
                    content[i.min(j)..i.max(j)].to_string()
                }
            };
            Edit {
                old_text,
                new_text: new,
            }
        })
        .collect();
    if let Err(violation) = oracles::check_edits(content, &edits, input.replace_all) {
        panic!("{violation}");
    }
});
