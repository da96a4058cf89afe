//! The has-queues messages: a printf template with one `%s` for the image name, saying
//! which layout was found or what is missing and why.

use super::types::{Flavour, Lacks, Layout, Missing};
use mqd_abi::notes::SendListing;
use std::ffi::{CStr, c_char};

/// Writes the has-queues message for `missing` into `out` (NUL-terminated,
/// a printf template with one `%s` for the image name).
pub(crate) fn describe_missing(missing: Missing, out: &mut [c_char]) {
    let mut text = MessageWriter::new(out);
    text.push("mqd: no message queues in '%s': ");
    match missing {
        Missing::Symbol(name) => {
            text.push("symbol ");
            text.push_name(name);
            text.push(" not found");
        }
        Missing::Type(name) => {
            text.push("type ");
            text.push_name(name);
            text.push(" unknown to the debugger");
        }
        Missing::Field(ty, field) => {
            text.push("field ");
            text.push_name(ty);
            text.push(".");
            text.push_name(field);
            text.push(" not found");
        }
        Missing::EitherSymbol(a, b) => {
            text.push("neither symbol ");
            text.push_name(a);
            text.push(" (MPICH 4.0.3 and later) nor ");
            text.push_name(b);
            text.push(" (MPICH 4.0.2 and earlier) found");
        }
        Missing::EitherType(a, b) => {
            text.push("neither type ");
            text.push_name(a);
            text.push(" (ch3 device) nor ");
            text.push_name(b);
            text.push(" (ch4 device) is known to the debugger");
        }
        Missing::EitherField(ty, a, b) => {
            text.push("neither field ");
            text.push_name(ty);
            text.push(".");
            text.push_name(a);
            text.push(" nor ");
            text.push_name(ty);
            text.push(".");
            text.push_name(b);
            text.push(" found");
        }
        Missing::Width(name) => {
            text.push("type ");
            text.push_name(name);
            text.push(" has an unsupported size");
        }
        Missing::Misplaced(ty, field) => {
            text.push("the debugger places field ");
            text.push_name(ty);
            text.push(".");
            text.push_name(field);
            text.push(
                " past the end of any MPICH object (64 KiB). Likely cause: damaged debug \
                 information, or types that are not MPICH's.",
            );
            return;
        }
    }
    text.push(
        ". Likely cause: MPICH built without --enable-debuginfo, libmpi stripped of its debug \
         information, or an MPICH version this library does not know.",
    );
}

/// Writes the success message: the layout found, and what it shows less of.
pub(crate) fn describe_layout(layout: &Layout, out: &mut [c_char]) {
    let mut text = MessageWriter::new(out);
    text.push("mqd: '%s' has ");
    text.push(layout.flavour.describe());
    for cost in layout.lacks.costs() {
        text.push("; ");
        text.push(cost);
    }
    // Last: cut short, it is not recognised, and a debugger proves less, never more.
    // The 4.x debug queues list blocking sends only from 4.1 on: 4.0.3 does not say.
    let listing = match layout.flavour {
        Flavour::Ch3 | Flavour::Ch4Am => Some(SendListing::NonBlockingOnly),
        Flavour::Debugq5 => Some(SendListing::All),
        Flavour::Debugq4 => None,
    };
    if let Some(listing) = listing.filter(|_| !layout.lacks.contains(Lacks::SEND_QUEUE)) {
        text.push("; ");
        text.push(listing.text());
    }
}

/// Appends text to a fixed C buffer, always leaving it NUL-terminated.
pub(crate) struct MessageWriter<'a> {
    out: &'a mut [c_char],
    len: usize,
}

impl<'a> MessageWriter<'a> {
    pub(crate) fn new(out: &'a mut [c_char]) -> Self {
        if let Some(first) = out.first_mut() {
            *first = 0;
        }
        MessageWriter { out, len: 0 }
    }

    pub(crate) fn push(&mut self, text: &str) {
        for &b in text.as_bytes() {
            if self.len + 1 >= self.out.len() {
                break;
            }
            self.out[self.len] = b as c_char;
            self.len += 1;
        }
        if let Some(end) = self.out.get_mut(self.len) {
            *end = 0;
        }
    }

    /// A name from the target side: `%` is doubled so the template stays safe.
    fn push_name(&mut self, name: &CStr) {
        for part in name.to_string_lossy().split_inclusive('%') {
            self.push(part);
            if part.ends_with('%') {
                self.push("%");
            }
        }
    }
}
