//! Moving items from the inbox into a new batch file (`runner resolve`): the batch's text,
//! and what is left of the inbox. Both renumber `@after:` tokens, because items are
//! numbered by their position in the file and the positions change.

use std::collections::{HashMap, HashSet};

use super::tokens::{self, BatchRef, Prerequisite};
use super::{EditError, Mark, Problem, Section, TodoDocument, batch_document};

/// A prerequisite of an item left in the inbox that moved to the batch: the item's
/// `@after:` now names it in the batch (`@after:todo-N#K`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MovedPrerequisite {
    /// The item that stays, by its number in the inbox before the move.
    pub item: u32,
    /// The item it waited for (`@after`), by its number in the inbox before the move.
    pub prerequisite: u32,
    /// Where that item is now.
    pub to: BatchRef,
}

/// What is left of an inbox when items move to a batch ([`TodoDocument::remove_extracted`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Remainder {
    /// The inbox text without the moved blocks, every other byte kept, except that the
    /// `@after:` tokens of the items left are renumbered to their new positions, and those
    /// naming a moved item name it in the batch.
    pub text: String,
    /// The prerequisites that moved to the batch, in file order.
    pub moved: Vec<MovedPrerequisite>,
}

/// The blocks of the items that move to a batch and their numbers there.
struct Extraction {
    todo_blocks: Vec<String>,
    idea_blocks: Vec<String>,
    /// Inbox number → batch number, for every item that moves (nested ones included).
    new_number: HashMap<u32, u32>,
    /// Inbox numbers of every item that moves, in the batch's order.
    order: Vec<u32>,
}

impl TodoDocument {
    /// The items `resolve` may hand out: open or in-progress top-level items of the Todo and
    /// Ideas sections whose blocks read without a problem ([`TodoDocument::block_problems`]),
    /// by number.
    pub(crate) fn resolvable(&self) -> Vec<u32> {
        self.items()
            .iter()
            .filter(|i| {
                i.parent.is_none()
                    && i.mark != Mark::Done
                    && matches!(i.section, Section::Todo | Section::Ideas)
            })
            .map(|i| i.number)
            .filter(|n| self.block_problems(*n).is_empty())
            .collect()
    }

    /// What `resolve --yes` hands out without `--select`: the open (`[ ]`) top-level Todo
    /// items of [`TodoDocument::resolvable`] whose prerequisites are done, handed out with
    /// them, or (for batch items) in `finished` — by number.
    pub(crate) fn open_todo_items(&self, finished: &HashSet<BatchRef>) -> Vec<u32> {
        let mut picked: Vec<u32> = self
            .resolvable()
            .into_iter()
            .filter(|n| {
                self.item(*n)
                    .is_some_and(|i| i.section == Section::Todo && i.mark == Mark::Open)
            })
            .collect();
        // Drop items waiting for what stays behind, until nothing changes.
        loop {
            let Some(at) = picked.iter().position(|n| {
                self.subtree(*n)
                    .iter()
                    .filter_map(|m| self.item(*m))
                    .any(|i| {
                        i.after_batches.iter().any(|b| !finished.contains(b))
                            || i.after.iter().any(|d| {
                                let done = self.item(*d).is_some_and(|d| d.mark == Mark::Done);
                                !done && !picked.iter().any(|p| self.subtree(*p).contains(d))
                            })
                    })
            }) else {
                return picked;
            };
            picked.remove(at);
        }
    }

    /// The problems on the line of item `number` or of an item nested in it (a bad
    /// `@after:` or `@context:` token): such a block cannot be handed out, other items can.
    pub(crate) fn block_problems(&self, number: u32) -> Vec<&Problem> {
        let lines: HashSet<usize> = self
            .subtree(number)
            .iter()
            .filter_map(|n| self.item(*n))
            .map(|i| i.line)
            .collect();
        self.problems()
            .iter()
            .filter(|p| lines.contains(&p.line))
            .collect()
    }

    /// The problems that are on no item's line (a frontmatter or code fence never closed):
    /// they put the reading of the whole file in doubt.
    pub(crate) fn file_problems(&self) -> Vec<&Problem> {
        let lines: HashSet<usize> = self.items().iter().map(|i| i.line).collect();
        self.problems()
            .iter()
            .filter(|p| !lines.contains(&p.line))
            .collect()
    }

    /// The numbers, in `other` (the same file read again), of the top-level items
    /// `numbers` of this document, matched by their whole block text (the k-th identical
    /// block matches the k-th); `None` if one is gone or changed.
    pub(crate) fn same_items_in(&self, other: &TodoDocument, numbers: &[u32]) -> Option<Vec<u32>> {
        let tops = |d: &TodoDocument| -> Vec<(u32, String)> {
            d.items()
                .iter()
                .filter(|i| i.parent.is_none())
                .map(|i| (i.number, d.block(i.number).unwrap_or_default()))
                .collect()
        };
        let (mine, theirs) = (tops(self), tops(other));
        numbers
            .iter()
            .map(|n| {
                let block = &mine.iter().find(|(m, _)| m == n)?.1;
                let k = mine
                    .iter()
                    .take_while(|(m, _)| m != n)
                    .filter(|(_, b)| b == block)
                    .count();
                theirs
                    .iter()
                    .filter(|(_, b)| b == block)
                    .nth(k)
                    .map(|(m, _)| *m)
            })
            .collect()
    }

    /// The text of a new batch file (`source: todo.md`, `created`) holding the blocks of the
    /// `selected` items (each with its continuation lines, nested items and `@context`), the
    /// Todo ones first, then the Ideas ones, each group in the order given. `@after:`
    /// tokens are renumbered to the batch's numbering; prerequisites already done (in this
    /// file, or batch items in `finished`) are dropped. Numbers that name no item are
    /// skipped. `selected` items are expected not to be nested in one another (a nested
    /// one would be copied twice).
    ///
    /// # Errors
    ///
    /// [`EditError::UnselectedPrerequisite`] if a moving item waits for an item that is
    /// neither moving nor done; [`EditError::UnfinishedPrerequisite`] if it waits for a
    /// batch item not in `finished`.
    pub(crate) fn extract_batch(
        &self,
        selected: &[u32],
        created: &str,
        finished: &HashSet<BatchRef>,
    ) -> Result<String, EditError> {
        let x = self.extraction(selected);
        for old in &x.order {
            let Some(item) = self.item(*old) else {
                continue;
            };
            for dep in &item.after {
                let done = self.item(*dep).is_some_and(|d| d.mark == Mark::Done);
                if !x.new_number.contains_key(dep) && !done {
                    return Err(EditError::UnselectedPrerequisite {
                        item: *old,
                        prerequisite: *dep,
                    });
                }
            }
            if let Some(b) = item.after_batches.iter().find(|b| !finished.contains(b)) {
                return Err(EditError::UnfinishedPrerequisite {
                    item: *old,
                    prerequisite: *b,
                });
            }
        }
        let text = batch_document(
            "todo.md",
            created,
            &x.todo_blocks,
            &x.idea_blocks,
            self.newline(),
        );
        let mut batch = TodoDocument::parse(&text);
        batch.renumber_after(|p| match p {
            Prerequisite::Item(n) => x.new_number.get(&n).copied().map(Prerequisite::Item),
            Prerequisite::Batch(_) => None,
        });
        Ok(batch.render())
    }

    /// The inbox left when the `selected` items move to batch file `todo-<batch>.md`: the
    /// text without their blocks ([`TodoDocument::remove_items`]), in which the items left
    /// have their `@after:` renumbered to their new positions, and prerequisites that moved
    /// are named in the batch (`@after:todo-<batch>#K`, listed in [`Remainder::moved`]), so
    /// the wait survives the move. The document itself is not changed.
    ///
    /// # Errors
    ///
    /// [`EditError::UnknownItem`] for the first number that names no item.
    pub(crate) fn remove_extracted(
        &self,
        selected: &[u32],
        batch: u32,
    ) -> Result<Remainder, EditError> {
        let (rest, _) = self.remove_items(selected)?;
        let x = self.extraction(selected);
        let staying = || {
            self.items()
                .iter()
                .filter(|i| !x.new_number.contains_key(&i.number))
        };
        let remaining: HashMap<u32, u32> = staying()
            .enumerate()
            .map(|(k, i)| (i.number, k as u32 + 1))
            .collect();
        let to = |d: &u32| {
            x.new_number
                .get(d)
                .map(|item| BatchRef { batch, item: *item })
        };
        let moved = staying()
            .flat_map(|i| {
                i.after.iter().filter_map(move |d| {
                    Some(MovedPrerequisite {
                        item: i.number,
                        prerequisite: *d,
                        to: to(d)?,
                    })
                })
            })
            .collect();
        let mut rest = TodoDocument::parse(&rest);
        rest.renumber_after(|p| match p {
            Prerequisite::Item(n) => remaining
                .get(&n)
                .map(|m| Prerequisite::Item(*m))
                .or_else(|| to(&n).map(Prerequisite::Batch)),
            batch_ref => Some(batch_ref),
        });
        Ok(Remainder {
            text: rest.render(),
            moved,
        })
    }

    /// The numbers of the items that move into a batch with `selected` (each with the items
    /// nested in it), in the order the batch numbers them 1, 2, ….
    pub(crate) fn moving(&self, selected: &[u32]) -> Vec<u32> {
        self.extraction(selected).order
    }

    /// The blocks of `selected` and the numbering of the batch they make.
    fn extraction(&self, selected: &[u32]) -> Extraction {
        let mut todo_blocks = Vec::new();
        let mut idea_blocks = Vec::new();
        let mut moved_todo = Vec::new();
        let mut moved_ideas = Vec::new();
        for n in selected {
            let Some(item) = self.item(*n) else { continue };
            let block = self.block(*n).unwrap_or_default();
            if item.section == Section::Ideas {
                idea_blocks.push(block);
                moved_ideas.extend(self.subtree(*n));
            } else {
                todo_blocks.push(block);
                moved_todo.extend(self.subtree(*n));
            }
        }
        let order: Vec<u32> = moved_todo.into_iter().chain(moved_ideas).collect();
        let new_number = order
            .iter()
            .enumerate()
            .map(|(i, old)| (*old, i as u32 + 1))
            .collect();
        Extraction {
            todo_blocks,
            idea_blocks,
            new_number,
            order,
        }
    }

    /// Item `number` and every item nested in it, in file order.
    fn subtree(&self, number: u32) -> Vec<u32> {
        self.items()
            .iter()
            .filter(|i| i.number == number || self.is_descendant(i.number, number))
            .map(|i| i.number)
            .collect()
    }

    /// Whether item `item` is nested, at any depth, in item `ancestor`.
    fn is_descendant(&self, item: u32, ancestor: u32) -> bool {
        let mut cur = self.item(item).and_then(|i| i.parent);
        while let Some(p) = cur {
            if p == ancestor {
                return true;
            }
            cur = self.item(p).and_then(|i| i.parent);
        }
        false
    }

    /// Rewrites every `@after:` token of the item lines with `map`, as the parser reads the
    /// tokens: only whole words of an item line's text, never text in code fences or
    /// continuation lines. Prerequisites mapped to `None` are dropped, and a token left
    /// empty is removed.
    pub(super) fn renumber_after(&mut self, map: impl Fn(Prerequisite) -> Option<Prerequisite>) {
        let mut changed = false;
        for span in &self.spans {
            let Some(line) = self.lines.get_mut(span.line) else {
                continue;
            };
            if let Some(text) = tokens::renumber_after(&line.text, span.text_start, &map) {
                changed |= text != line.text;
                line.text = text;
            }
        }
        if changed {
            self.reload();
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn resolve_offers_open_top_level_items_and_yes_takes_the_open_todos() {
        let doc = super::TodoDocument::parse(
            "## Todo\n- [ ] one\n  - [ ] nested\n- [x] done\n- [~] going\n## Ideas\n- [ ] idea\n",
        );
        assert_eq!(doc.resolvable(), [1, 4, 5]);
        assert_eq!(doc.open_todo_items(&HashSet::new()), [1]);
    }

    use super::*;

    const INBOX: &str = "# TODO\n\nLast updated: 2026-01-01\n\n## 📋 Todo\n- [ ] first @context:cp-1.md\n  more text\n- [ ] second\n- [ ] third @after:1,2\n- [x] done\n- [ ] fourth @after:4\n\n## 💡 Ideas\n- [ ] idea\n";

    fn renumbered(text: &str, map: &HashMap<u32, u32>) -> String {
        let mut doc = TodoDocument::parse(text);
        doc.renumber_after(|p| match p {
            Prerequisite::Item(n) => map.get(&n).copied().map(Prerequisite::Item),
            other => Some(other),
        });
        doc.render()
    }

    fn none() -> HashSet<BatchRef> {
        HashSet::new()
    }

    fn remainder(text: &str, selected: &[u32]) -> Remainder {
        match TodoDocument::parse(text).remove_extracted(selected, 5) {
            Ok(rest) => rest,
            Err(error) => panic!("{error}"),
        }
    }

    #[test]
    fn selected_blocks_move_with_renumbered_prerequisites() {
        let doc = TodoDocument::parse(INBOX);
        let text = doc
            .extract_batch(&[2, 5, 6], "2026-11-30", &none())
            .expect("builds");
        let batch = TodoDocument::parse(&text);
        let titles: Vec<&str> = batch.items().iter().map(|i| i.title.as_str()).collect();
        assert_eq!(titles, vec!["second", "fourth", "idea"]);
        assert!(
            text.contains("- [ ] fourth\n"),
            "a ticked prerequisite is dropped: {text}"
        );
        let e = doc
            .extract_batch(&[3], "2026-11-30", &none())
            .expect_err("unselected prerequisite");
        assert!(e.to_string().contains("waits for item 1"), "{e}");
        assert_eq!(
            e,
            EditError::UnselectedPrerequisite {
                item: 3,
                prerequisite: 1
            }
        );
        let text = doc.extract_batch(&[1, 2, 3], "d", &none()).expect("builds");
        assert!(
            text.contains("- [ ] third @after:1,2\n") && text.contains("  more text\n"),
            "{text}"
        );
    }

    #[test]
    fn renumbering_maps_old_numbers_to_new() {
        let map = HashMap::from([(7, 1), (9, 2)]);
        assert_eq!(
            renumbered("## Todo\n- [ ] a @after:9,7 x\n", &map),
            "## Todo\n- [ ] a @after:2,1 x\n"
        );
    }

    #[test]
    fn batch_prerequisites_follow_their_items_and_ideas_come_last() {
        let inbox = "## 💡 Ideas\n- [ ] idea @after:3\n## 📋 Todo\n- [ ] skipped\n- [ ] task\n";
        let text = TodoDocument::parse(inbox)
            .extract_batch(&[1, 3], "2026-11-30", &none())
            .expect("builds");
        assert!(
            text.ends_with("## 📋 Todo\n- [ ] task\n\n## 💡 Ideas\n- [ ] idea @after:1\n"),
            "the idea waits for the task, now item 1: {text}"
        );
        assert!(TodoDocument::parse(&text).problems().is_empty(), "{text}");
    }

    #[test]
    fn batch_renumbering_leaves_fenced_and_non_token_text_alone() {
        let inbox = "## Todo\n- [ ] skip\n- [ ] a\n- [ ] b @after:2 see`@after:2`\n  ```\n  - [ ] example @after:2\n  ```\n  notes: @after:2\n";
        let text = TodoDocument::parse(inbox)
            .extract_batch(&[2, 3], "2026-11-30", &none())
            .expect("builds");
        assert!(
            text.ends_with(
                "- [ ] a\n- [ ] b @after:1 see`@after:2`\n  ```\n  - [ ] example @after:2\n  ```\n  notes: @after:2\n\n## 💡 Ideas\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn a_prerequisite_left_in_the_inbox_is_renumbered_when_items_before_it_move() {
        let inbox =
            "## Todo\n- [ ] zero\n- [ ] first\n- [ ] second @after:1\n- [ ] third @after:3\n";
        let rest = remainder(inbox, &[2]);
        assert_eq!(
            rest.text,
            "## Todo\n- [ ] zero\n- [ ] second @after:1\n- [ ] third @after:2\n"
        );
        assert!(rest.moved.is_empty());
        let rest = remainder(inbox, &[1]);
        assert_eq!(
            rest.text, "## Todo\n- [ ] first\n- [ ] second @after:todo-5#1\n- [ ] third @after:2\n",
            "a prerequisite that moved is named in the batch, the other one renumbered"
        );
        assert_eq!(
            rest.moved,
            [MovedPrerequisite {
                item: 3,
                prerequisite: 1,
                to: BatchRef { batch: 5, item: 1 }
            }]
        );
        assert!(TodoDocument::parse(&rest.text).problems().is_empty());
    }

    #[test]
    fn a_nested_item_moves_with_its_parent_and_is_reported_as_a_moved_prerequisite() {
        let rest = remainder("- [ ] p\n  - [ ] c\n- [ ] s @after:2 tail\n", &[1]);
        assert_eq!(rest.text, "- [ ] s @after:todo-5#2 tail\n");
        assert_eq!(
            rest.moved,
            [MovedPrerequisite {
                item: 3,
                prerequisite: 2,
                to: BatchRef { batch: 5, item: 2 }
            }]
        );
    }

    #[test]
    fn inbox_renumbering_keeps_bom_crlf_fences_and_non_token_text() {
        let inbox = "\u{feff}## Todo\r\n- [ ] a\r\n- [ ] b @after:1 tail\r\n  ```\r\n  - [ ] fenced @after:2\r\n  ```\r\n- [ ] c @after:2 x@after:2\r\n";
        let rest = remainder(inbox, &[1]);
        assert_eq!(
            rest.text,
            "\u{feff}## Todo\r\n- [ ] b @after:todo-5#1 tail\r\n  ```\r\n  - [ ] fenced @after:2\r\n  ```\r\n- [ ] c @after:1 x@after:2\r\n"
        );
    }

    #[test]
    fn every_item_ends_up_in_exactly_one_of_the_two_files() {
        let inboxes = [
            INBOX,
            "- [ ] p @after:3\n  - [ ] c\n    ```\n    - [ ] fenced\n    ```\n- [ ] s @after:2\n",
            "\u{feff}## Todo\r\n- [ ] a\r\n- [ ] b @after:1\r\n## Ideas\r\n- [ ] i @after:2",
        ];
        let mut checked = 0;
        for inbox in inboxes {
            let doc = TodoDocument::parse(inbox);
            let top: Vec<u32> = doc
                .items()
                .iter()
                .filter(|i| i.parent.is_none())
                .map(|i| i.number)
                .collect();
            for selected in top.iter().map(|n| vec![*n]).chain([top.clone()]) {
                let Ok(batch) = doc.extract_batch(&selected, "d", &none()) else {
                    continue;
                };
                let rest = remainder(inbox, &selected);
                let moved = TodoDocument::parse(&batch).items().len();
                let left = TodoDocument::parse(&rest.text).items().len();
                assert_eq!(moved + left, doc.items().len(), "{inbox:?} {selected:?}");
                assert!(moved >= selected.len(), "{batch:?}");
                checked += 1;
            }
        }
        assert!(checked >= 6, "only {checked} selections could move");
    }

    #[test]
    fn unknown_items_are_refused_and_nothing_moves() {
        let doc = TodoDocument::parse(INBOX);
        assert_eq!(
            doc.remove_extracted(&[2, 9], 1),
            Err(EditError::UnknownItem(9))
        );
        assert_eq!(doc.render(), INBOX);
    }

    #[test]
    fn chosen_items_are_found_again_by_their_block_or_not_at_all() {
        let shown = TodoDocument::parse("## Todo\n- [ ] a\n- [ ] b\n- [ ] a\n## Ideas\n- [ ] i\n");
        let added = TodoDocument::parse(
            "## Todo\n- [ ] a\n- [ ] b\n- [ ] a\n- [ ] new\n## Ideas\n- [ ] i\n",
        );
        assert_eq!(shown.same_items_in(&added, &[3, 4]), Some(vec![3, 5]));
        let edited = TodoDocument::parse("## Todo\n- [ ] a\n- [ ] b, edited\n- [ ] a\n");
        assert_eq!(shown.same_items_in(&edited, &[1, 3]), Some(vec![1, 3]));
        assert_eq!(shown.same_items_in(&edited, &[2]), None);
    }

    #[test]
    fn a_bad_item_stays_out_and_so_does_what_waits_for_it() {
        let doc = TodoDocument::parse(
            "```x\n```\n## Todo\n- [ ] bad @after:x\n- [ ] after bad @after:1\n- [ ] waits @after:todo-2#1\n- [ ] good\n",
        );
        assert!(doc.file_problems().is_empty(), "{:?}", doc.problems());
        assert_eq!(doc.block_problems(1).len(), 1);
        assert_eq!(doc.resolvable(), [2, 3, 4]);
        assert_eq!(doc.open_todo_items(&none()), [4]);
        let done = HashSet::from([BatchRef { batch: 2, item: 1 }]);
        assert_eq!(doc.open_todo_items(&done), [3, 4]);
        let e = doc
            .extract_batch(&[3], "d", &none())
            .expect_err("unfinished");
        assert!(e.to_string().contains("waits for todo-2#1"), "{e}");
        let batch = doc.extract_batch(&[3], "d", &done).expect("finished");
        assert!(
            batch.contains("- [ ] waits\n"),
            "a met batch prerequisite is dropped: {batch}"
        );
        let fence = TodoDocument::parse("## Todo\n- [ ] a\n```\n");
        assert_eq!(fence.file_problems().len(), 1);
    }
}
