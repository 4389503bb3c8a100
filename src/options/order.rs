//! `--order` (BATCH.md `order:`): in which order a run hands out its items.

use std::str::FromStr;

/// The order items start in. The output keeps the input's order either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub(crate) enum Order {
    /// The input's order.
    #[default]
    Input,
    /// The longest first, by expected duration: the `weight_column`'s number, else the
    /// item's `duration_s` in the previous output; items with neither go last, in input
    /// order. Long items started last are what make a run end late.
    LongestFirst,
}

impl Order {
    /// What `order` must be.
    pub(crate) const RULE: &'static str = "must be input or longest-first";
}

impl FromStr for Order {
    type Err = String;

    fn from_str(text: &str) -> Result<Order, String> {
        match text.trim() {
            "input" => Ok(Order::Input),
            "longest-first" => Ok(Order::LongestFirst),
            _ => Err(Order::RULE.to_owned()),
        }
    }
}
