//! What waits on what across a store's todo files (the inbox and every `todo-N.md`): the
//! links `runner reset` follows to an item's dependents and `runner clean --completed` to
//! the prerequisites of what is still open.
//!
//! An item waits on another through
//! - `@after:K`: item K of the same file;
//! - `@after:todo-N#K`: item K of batch file `todo-N.md`;
//! - its `@fragment:NAME#ROUND/STEP(A,B)` mark: every item of the same fragment round whose
//!   step is A or B, wherever it is now. This link outlives the `@after:` ones, which
//!   `runner resolve` drops once a prerequisite is met.
//!
//! Pure: the files come in read ([`crate::store::Store::todo_files`]).

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::path::PathBuf;

use crate::source::todo::{BatchRef, TodoDocument};

/// One todo file of the store as read.
#[derive(Debug, Clone)]
pub(crate) struct TodoFile {
    /// Its path.
    pub path: PathBuf,
    /// N of `todo-N.md`; `None` for the inbox.
    pub batch: Option<u32>,
    /// What it parses to.
    pub doc: TodoDocument,
}

impl TodoFile {
    /// Its file name (`todo.md`, `todo-3.md`), as messages name it.
    pub(crate) fn name(&self) -> String {
        self.path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }
}

/// An item of the store: which file (an index into the files given to [`Links::of`]) and its
/// number there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct At {
    /// The file's index.
    pub file: usize,
    /// The item's number in it.
    pub item: u32,
}

/// How an item waits on another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Via {
    /// `@after:K` in the same file.
    After,
    /// `@after:todo-N#K`.
    Batch(BatchRef),
    /// Its fragment mark names the other item's step (`NAME#ROUND/STEP`).
    Step(String),
}

impl fmt::Display for Via {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Via::After => write!(f, "@after"),
            Via::Batch(b) => write!(f, "@after:{b}"),
            Via::Step(s) => write!(f, "step {s}"),
        }
    }
}

/// `item` waits on `on`, through `via`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Link {
    /// The waiting item.
    pub item: At,
    /// Its prerequisite.
    pub on: At,
    /// How.
    pub via: Via,
}

/// Every link between the items of a store's files.
#[derive(Debug, Clone, Default)]
pub(crate) struct Links {
    links: Vec<Link>,
}

impl Links {
    /// The links among the items of `files`. A link naming an item that is not there (a
    /// batch file removed, a number out of range) is left out.
    pub(crate) fn of(files: &[TodoFile]) -> Links {
        let batch_file: HashMap<u32, usize> = files
            .iter()
            .enumerate()
            .filter_map(|(k, f)| Some((f.batch?, k)))
            .collect();
        let mut steps: HashMap<(&str, u32, &str), Vec<At>> = HashMap::new();
        for (file, f) in files.iter().enumerate() {
            for i in f.doc.items() {
                if let Some(m) = &i.fragment {
                    let at = At {
                        file,
                        item: i.number,
                    };
                    steps
                        .entry((&m.name, m.round, &m.step))
                        .or_default()
                        .push(at);
                }
            }
        }
        let mut links = Vec::new();
        for (file, f) in files.iter().enumerate() {
            for i in f.doc.items() {
                let item = At {
                    file,
                    item: i.number,
                };
                for n in &i.after {
                    if f.doc.item(*n).is_some() && *n != i.number {
                        let on = At { file, item: *n };
                        links.push(Link {
                            item,
                            on,
                            via: Via::After,
                        });
                    }
                }
                for b in &i.after_batches {
                    let Some(&other) = batch_file.get(&b.batch) else {
                        continue;
                    };
                    if files
                        .get(other)
                        .is_some_and(|o| o.doc.item(b.item).is_some())
                    {
                        let on = At {
                            file: other,
                            item: b.item,
                        };
                        links.push(Link {
                            item,
                            on,
                            via: Via::Batch(*b),
                        });
                    }
                }
                let Some(m) = &i.fragment else { continue };
                for key in &m.after {
                    let found = steps.get(&(m.name.as_str(), m.round, key.as_str()));
                    for on in found.into_iter().flatten().filter(|on| **on != item) {
                        let via = Via::Step(format!("{}#{}/{key}", m.name, m.round));
                        links.push(Link { item, on: *on, via });
                    }
                }
            }
        }
        Links { links }
    }

    /// Every link, waiting item first, in file and item order.
    pub(crate) fn all(&self) -> &[Link] {
        &self.links
    }

    /// `start` and every item they wait on, directly or through others, each with the link
    /// that first reached it (`None` for a start), in the order reached.
    pub(crate) fn prerequisites(
        &self,
        start: impl IntoIterator<Item = At>,
    ) -> Vec<(At, Option<&Link>)> {
        self.reach(start, |l| (l.item, l.on), |_| true)
    }

    /// `start` and every item that waits on them, directly or through others, as long as
    /// each is `within`: in the order reached.
    pub(crate) fn dependents(
        &self,
        start: impl IntoIterator<Item = At>,
        within: impl Fn(At) -> bool,
    ) -> Vec<At> {
        self.reach(start, |l| (l.on, l.item), within)
            .into_iter()
            .map(|(at, _)| at)
            .collect()
    }

    /// Breadth-first from `start` along `edge` (from → to) of each link.
    fn reach(
        &self,
        start: impl IntoIterator<Item = At>,
        edge: impl Fn(&Link) -> (At, At),
        within: impl Fn(At) -> bool,
    ) -> Vec<(At, Option<&Link>)> {
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        let mut queue: VecDeque<At> = VecDeque::new();
        for at in start {
            if seen.insert(at) {
                out.push((at, None));
                queue.push_back(at);
            }
        }
        while let Some(from) = queue.pop_front() {
            for l in &self.links {
                let (a, b) = edge(l);
                if a == from && within(b) && seen.insert(b) {
                    out.push((b, Some(l)));
                    queue.push_back(b);
                }
            }
        }
        out
    }
}

/// The items of one round of a fragment, wherever they are now.
#[derive(Debug, Clone)]
pub(crate) struct Round {
    /// The round's number.
    pub number: u32,
    /// Its items, in file order (the inbox first), each with its step's key.
    pub items: Vec<(At, String)>,
}

impl Round {
    /// The latest round of fragment `name` in `files` (the highest round any item's mark
    /// names), or `None` when it was never applied there.
    pub(crate) fn latest(files: &[TodoFile], name: &str) -> Option<Round> {
        let number = crate::fragment::latest_round(files.iter().map(|f| &f.doc), name)?;
        let items = files
            .iter()
            .enumerate()
            .flat_map(|(file, f)| {
                f.doc.items().iter().filter_map(move |i| {
                    let m = i.fragment.as_ref()?;
                    let at = At {
                        file,
                        item: i.number,
                    };
                    (m.name == name && m.round == number).then(|| (at, m.step.clone()))
                })
            })
            .collect();
        Some(Round { number, items })
    }

    /// The keys of the round's steps, sorted.
    pub(crate) fn steps(&self) -> Vec<&str> {
        let mut keys: Vec<&str> = self.items.iter().map(|(_, k)| k.as_str()).collect();
        keys.sort_unstable();
        keys.dedup();
        keys
    }

    /// The items of step `step` (every item without one) and every item of the round that
    /// waits on them through `links`, directly or through other items of the round; `None`
    /// when no item of the round is of that step.
    pub(crate) fn step_and_followers(&self, links: &Links, step: Option<&str>) -> Option<Vec<At>> {
        let start: Vec<At> = self
            .items
            .iter()
            .filter(|(_, k)| step.is_none_or(|s| s == k))
            .map(|(at, _)| *at)
            .collect();
        if start.is_empty() {
            return None;
        }
        Some(links.dependents(start, |at| self.items.iter().any(|(a, _)| *a == at)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, batch: Option<u32>, text: &str) -> TodoFile {
        TodoFile {
            path: PathBuf::from(name),
            batch,
            doc: TodoDocument::parse(text),
        }
    }

    fn at(file: usize, item: u32) -> At {
        At { file, item }
    }

    /// The inbox holds `tag` (waiting on `notes` in todo-1) and a user item after `tag`;
    /// todo-2 holds `push`, whose `@after` resolve dropped: only its mark links it.
    fn store() -> Vec<TodoFile> {
        vec![
            file(
                "todo.md",
                None,
                "## Todo\n- [ ] Tag @after:todo-1#1 @fragment:rel#1/tag(notes)\n- [ ] mine @after:1\n- [ ] other round @fragment:rel#2/notes\n",
            ),
            file(
                "todo-1.md",
                Some(1),
                "## Todo\n- [x] Notes @fragment:rel#1/notes\n",
            ),
            file(
                "todo-2.md",
                Some(2),
                "## Todo\n- [ ] Push @fragment:rel#1/push(tag)\n",
            ),
        ]
    }

    #[test]
    fn prerequisites_follow_every_kind_of_link() {
        let files = store();
        let links = Links::of(&files);
        let reached: Vec<(At, Option<Via>)> = links
            .prerequisites([at(2, 1)])
            .into_iter()
            .map(|(a, l)| (a, l.map(|l| l.via.clone())))
            .collect();
        assert_eq!(
            reached,
            [
                (at(2, 1), None),
                (at(0, 1), Some(Via::Step("rel#1/tag".into()))),
                (at(1, 1), Some(Via::Batch(BatchRef { batch: 1, item: 1 }))),
            ]
        );
    }

    #[test]
    fn a_round_reopens_from_a_step_along_its_links() {
        let files = store();
        let links = Links::of(&files);
        let round = Round::latest(&files, "rel").expect("applied");
        assert_eq!(round.number, 2, "the latest round");
        assert_eq!(round.steps(), ["notes"]);
        let round = Round {
            number: 1,
            items: vec![
                (at(0, 1), "tag".into()),
                (at(1, 1), "notes".into()),
                (at(2, 1), "push".into()),
            ],
        };
        assert_eq!(
            round.step_and_followers(&links, Some("tag")),
            Some(vec![at(0, 1), at(2, 1)])
        );
        assert_eq!(
            round.step_and_followers(&links, None),
            Some(vec![at(0, 1), at(1, 1), at(2, 1)])
        );
        assert_eq!(round.step_and_followers(&links, Some("nope")), None);
        assert_eq!(Round::latest(&files, "other").map(|r| r.number), None);
    }

    #[test]
    fn dependents_stay_within_what_is_asked() {
        let files = store();
        let links = Links::of(&files);
        assert_eq!(
            links.dependents([at(1, 1)], |_| true),
            [at(1, 1), at(0, 1), at(0, 2), at(2, 1)]
        );
        let round_one = |a: At| {
            files[a.file]
                .doc
                .item(a.item)
                .and_then(|i| i.fragment.as_ref())
                .is_some_and(|m| m.round == 1)
        };
        assert_eq!(
            links.dependents([at(1, 1)], round_one),
            [at(1, 1), at(0, 1), at(2, 1)],
            "the user's own item and the other round are not the round's"
        );
    }
}
