//! Moving items from the inbox into a new batch file (`runner resolve`): the batch's text,
//! and what is left of the inbox. Both renumber `@after:` tokens, because items are
//! numbered by their position in the file and the positions change.

use std::collections::{HashMap, HashSet};

use super::tokens;
use super::{EditError, Mark, Section, TodoDocument, batch_document};

/// A prerequisite dropped from an item left in the inbox because it moved to the batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DroppedPrerequisite {
    /// The item that stays, by its number in the inbox before the move.
    pub item: u32,
    /// The item it waited for (`@after`), by its number in the inbox before the move.
    pub prerequisite: u32,
}

/// What is left of an inbox when items move to a batch ([`TodoDocument::remove_extracted`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Remainder {
    /// The inbox text without the moved blocks, every other byte kept, except that the
    /// `@after:` tokens of the items left are renumbered to their new positions.
    pub text: String,
    /// The prerequisites that moved to the batch and so were dropped from the `@after:` of
    /// items left behind, in file order.
    pub dropped: Vec<DroppedPrerequisite>,
}

impl TodoDocument {
    /// The items `resolve` may hand out: open or in-progress top-level items of the Todo and
    /// Ideas sections, by number.
    pub fn resolvable(&self) -> Vec<u32> {
        self.items()
            .iter()
            .filter(|i| {
                i.parent.is_none()
                    && i.mark != Mark::Done
                    && matches!(i.section, Section::Todo | Section::Ideas)
            })
            .map(|i| i.number)
            .collect()
    }

    /// What `resolve --yes` hands out without `--select`: the open (`[ ]`) top-level Todo
    /// items, by number.
    pub fn open_todo_items(&self) -> Vec<u32> {
        self.resolvable()
            .into_iter()
            .filter(|n| {
                self.item(*n)
                    .is_some_and(|i| i.section == Section::Todo && i.mark == Mark::Open)
            })
            .collect()
    }

    /// The text of a new batch file (`source: todo.md`, `created`) holding the blocks of the
    /// `selected` items (each with its continuation lines, nested items and `@context`), the
    /// Todo ones first, then the Ideas ones, each group in the order given. `@after:`
    /// tokens are renumbered to the batch's numbering; prerequisites already done are
    /// dropped. Numbers that name no item are skipped. `selected` items are expected not to
    /// be nested in one another (a nested one would be copied twice).
    ///
    /// # Errors
    ///
    /// [`EditError::UnselectedPrerequisite`] if a moving item waits for an item that is
    /// neither moving nor done.
    pub fn extract_batch(&self, selected: &[u32], created: &str) -> Result<String, EditError> {
        let mut todo_blocks = Vec::new();
        let mut idea_blocks = Vec::new();
        // Inbox numbers of every item that moves, in the batch's order (Todo blocks first).
        let mut moved_todo = Vec::new();
        let mut moved_ideas = Vec::new();
        for n in selected {
            let Some(item) = self.item(*n) else { continue };
            let block = self.block(*n).unwrap_or_default();
            let subtree: Vec<u32> = self
                .items()
                .iter()
                .filter(|i| i.number == *n || self.is_descendant(i.number, *n))
                .map(|i| i.number)
                .collect();
            if item.section == Section::Ideas {
                idea_blocks.push(block);
                moved_ideas.extend(subtree);
            } else {
                todo_blocks.push(block);
                moved_todo.extend(subtree);
            }
        }
        let order: Vec<u32> = moved_todo.into_iter().chain(moved_ideas).collect();
        let new_number: HashMap<u32, u32> = order
            .iter()
            .enumerate()
            .map(|(i, old)| (*old, i as u32 + 1))
            .collect();
        for old in &order {
            let Some(item) = self.item(*old) else {
                continue;
            };
            for dep in &item.after {
                let done = self.item(*dep).is_some_and(|d| d.mark == Mark::Done);
                if !new_number.contains_key(dep) && !done {
                    return Err(EditError::UnselectedPrerequisite {
                        item: *old,
                        prerequisite: *dep,
                    });
                }
            }
        }
        let text = batch_document(
            "todo.md",
            created,
            &todo_blocks,
            &idea_blocks,
            self.newline(),
        );
        let mut batch = TodoDocument::parse(&text);
        batch.renumber_after(&new_number);
        Ok(batch.render())
    }

    /// The inbox left when the `selected` items move to a batch: the text without their
    /// blocks ([`TodoDocument::remove_items`]), in which the items left have their `@after:`
    /// renumbered to their new positions, and prerequisites that moved are dropped (and
    /// listed in [`Remainder::dropped`]). The document itself is not changed.
    ///
    /// # Errors
    ///
    /// [`EditError::UnknownItem`] for the first number that names no item.
    pub fn remove_extracted(&self, selected: &[u32]) -> Result<Remainder, EditError> {
        let (rest, _) = self.remove_items(selected)?;
        let moved: HashSet<u32> = self
            .items()
            .iter()
            .filter(|i| {
                selected
                    .iter()
                    .any(|s| i.number == *s || self.is_descendant(i.number, *s))
            })
            .map(|i| i.number)
            .collect();
        let staying = || self.items().iter().filter(|i| !moved.contains(&i.number));
        let remaining: HashMap<u32, u32> = staying()
            .enumerate()
            .map(|(k, i)| (i.number, k as u32 + 1))
            .collect();
        let dropped = staying()
            .flat_map(|i| {
                i.after
                    .iter()
                    .filter(|d| moved.contains(d))
                    .map(|d| DroppedPrerequisite {
                        item: i.number,
                        prerequisite: *d,
                    })
            })
            .collect();
        let mut rest = TodoDocument::parse(&rest);
        rest.renumber_after(&remaining);
        Ok(Remainder {
            text: rest.render(),
            dropped,
        })
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

    /// Rewrites every `@after:` token of the item lines with `map` (old → new numbers), as
    /// the parser reads the tokens: only whole words of an item line's text, never text in
    /// code fences or continuation lines. Numbers not in the map are dropped, and a token
    /// left empty is removed.
    fn renumber_after(&mut self, map: &HashMap<u32, u32>) {
        let mut changed = false;
        for span in &self.spans {
            let Some(line) = self.lines.get_mut(span.line) else {
                continue;
            };
            if let Some(text) =
                tokens::renumber_after(&line.text, span.text_start, |n| map.get(&n).copied())
            {
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
        assert_eq!(doc.open_todo_items(), [1]);
    }

    use super::*;

    const INBOX: &str = "# TODO\n\nLast updated: 2026-01-01\n\n## 📋 Todo\n- [ ] first @context:cp-1.md\n  more text\n- [ ] second\n- [ ] third @after:1,2\n- [x] done\n- [ ] fourth @after:4\n\n## 💡 Ideas\n- [ ] idea\n";

    fn renumbered(text: &str, map: &HashMap<u32, u32>) -> String {
        let mut doc = TodoDocument::parse(text);
        doc.renumber_after(map);
        doc.render()
    }

    fn remainder(text: &str, selected: &[u32]) -> Remainder {
        match TodoDocument::parse(text).remove_extracted(selected) {
            Ok(rest) => rest,
            Err(error) => panic!("{error}"),
        }
    }

    #[test]
    fn selected_blocks_move_with_renumbered_prerequisites() {
        let doc = TodoDocument::parse(INBOX);
        let text = doc.extract_batch(&[2, 5, 6], "2026-11-30").expect("builds");
        let batch = TodoDocument::parse(&text);
        let titles: Vec<&str> = batch.items().iter().map(|i| i.title.as_str()).collect();
        assert_eq!(titles, vec!["second", "fourth", "idea"]);
        assert!(
            text.contains("- [ ] fourth\n"),
            "a ticked prerequisite is dropped: {text}"
        );
        let e = doc
            .extract_batch(&[3], "2026-11-30")
            .expect_err("unselected prerequisite");
        assert!(e.to_string().contains("waits for item 1"), "{e}");
        assert_eq!(
            e,
            EditError::UnselectedPrerequisite {
                item: 3,
                prerequisite: 1
            }
        );
        let text = doc.extract_batch(&[1, 2, 3], "d").expect("builds");
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
            .extract_batch(&[1, 3], "2026-11-30")
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
            .extract_batch(&[2, 3], "2026-11-30")
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
        assert!(rest.dropped.is_empty());
        let rest = remainder(inbox, &[1]);
        assert_eq!(
            rest.text, "## Todo\n- [ ] first\n- [ ] second\n- [ ] third @after:2\n",
            "a prerequisite that moved is dropped, the other one renumbered"
        );
        assert_eq!(
            rest.dropped,
            [DroppedPrerequisite {
                item: 3,
                prerequisite: 1
            }]
        );
        assert!(TodoDocument::parse(&rest.text).problems().is_empty());
    }

    #[test]
    fn a_nested_item_moves_with_its_parent_and_is_reported_as_a_dropped_prerequisite() {
        let rest = remainder("- [ ] p\n  - [ ] c\n- [ ] s @after:2 tail\n", &[1]);
        assert_eq!(rest.text, "- [ ] s tail\n");
        assert_eq!(
            rest.dropped,
            [DroppedPrerequisite {
                item: 3,
                prerequisite: 2
            }]
        );
    }

    #[test]
    fn inbox_renumbering_keeps_bom_crlf_fences_and_non_token_text() {
        let inbox = "\u{feff}## Todo\r\n- [ ] a\r\n- [ ] b @after:1 tail\r\n  ```\r\n  - [ ] fenced @after:2\r\n  ```\r\n- [ ] c @after:2 x@after:2\r\n";
        let rest = remainder(inbox, &[1]);
        assert_eq!(
            rest.text,
            "\u{feff}## Todo\r\n- [ ] b tail\r\n  ```\r\n  - [ ] fenced @after:2\r\n  ```\r\n- [ ] c @after:1 x@after:2\r\n"
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
                let Ok(batch) = doc.extract_batch(&selected, "d") else {
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
            doc.remove_extracted(&[2, 9]),
            Err(EditError::UnknownItem(9))
        );
        assert_eq!(doc.render(), INBOX);
    }
}
