//! The attempts in flight, oldest first.
//!
//! A doubly linked list threaded through one link per attempt (attempt numbers are dense and
//! increasing, so the links are a `Vec` indexed by them): ending an attempt anywhere in the
//! list is O(1), and walking it visits only attempts still in flight, however many have
//! finished behind a long-lived one. Since every attempt has the same timeout, the oldest is
//! also the next to time out.

use alloc::vec::Vec;

/// No attempt: the end of the list, or an attempt not in it.
const NONE: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
struct Link {
    prev: u32,
    next: u32,
    linked: bool,
}

/// See the module documentation.
#[derive(Clone, Debug)]
pub(super) struct InFlightList {
    head: u32,
    tail: u32,
    links: Vec<Link>,
}

impl InFlightList {
    /// An empty list with room for `attempts` attempts (pushing more reallocates).
    pub(super) fn with_capacity(attempts: usize) -> Self {
        InFlightList { head: NONE, tail: NONE, links: Vec::with_capacity(attempts) }
    }

    /// Appends attempt `n`, the newest; `n` must be the number of attempts pushed so far.
    pub(super) fn push_back(&mut self, n: u32) {
        debug_assert_eq!(n as usize, self.links.len(), "attempt numbers are dense");
        self.links.push(Link { prev: self.tail, next: NONE, linked: true });
        match self.tail {
            NONE => self.head = n,
            tail => self.links[tail as usize].next = n,
        }
        self.tail = n;
    }

    /// Moves attempt `n`, in flight, behind every other (an attempt given a later timeout);
    /// nothing if it is not in the list.
    pub(super) fn move_to_back(&mut self, n: u32) {
        if !self.links.get(n as usize).is_some_and(|link| link.linked) || self.tail == n {
            return;
        }
        self.remove(n);
        self.links[n as usize] = Link { prev: self.tail, next: NONE, linked: true };
        match self.tail {
            NONE => self.head = n,
            tail => self.links[tail as usize].next = n,
        }
        self.tail = n;
    }

    /// Takes attempt `n` out of the list; nothing if it is not in it.
    pub(super) fn remove(&mut self, n: u32) {
        let Some(&Link { prev, next, linked: true }) = self.links.get(n as usize) else { return };
        match prev {
            NONE => self.head = next,
            prev => self.links[prev as usize].next = next,
        }
        match next {
            NONE => self.tail = prev,
            next => self.links[next as usize].prev = prev,
        }
        self.links[n as usize] = Link { prev: NONE, next: NONE, linked: false };
    }

    /// The oldest attempt in flight.
    pub(super) fn front(&self) -> Option<u32> {
        (self.head != NONE).then_some(self.head)
    }

    /// The attempt after `n` (newer), if `n` is in the list and not the newest.
    pub(super) fn next_of(&self, n: u32) -> Option<u32> {
        let link = self.links.get(n as usize).filter(|l| l.linked)?;
        (link.next != NONE).then_some(link.next)
    }

    /// The attempts in flight, oldest first.
    pub(super) fn iter(&self) -> impl DoubleEndedIterator<Item = u32> + '_ {
        Walk { list: self, front: self.head, back: self.tail }
    }
}

/// Walks the list from both ends until they meet.
struct Walk<'a> {
    list: &'a InFlightList,
    front: u32,
    back: u32,
}

impl Iterator for Walk<'_> {
    type Item = u32;

    fn next(&mut self) -> Option<u32> {
        let n = self.front;
        if n == NONE {
            return None;
        }
        if n == self.back {
            (self.front, self.back) = (NONE, NONE);
        } else {
            self.front = self.list.links[n as usize].next;
        }
        Some(n)
    }
}

impl DoubleEndedIterator for Walk<'_> {
    fn next_back(&mut self) -> Option<u32> {
        let n = self.back;
        if n == NONE {
            return None;
        }
        if n == self.front {
            (self.front, self.back) = (NONE, NONE);
        } else {
            self.back = self.list.links[n as usize].prev;
        }
        Some(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    fn list(n: u32) -> InFlightList {
        let mut list = InFlightList::with_capacity(n as usize);
        (0..n).for_each(|i| list.push_back(i));
        list
    }

    #[test]
    fn removal_anywhere_keeps_the_order_of_the_rest_both_ways() {
        let mut l = list(5);
        l.remove(2);
        l.remove(0);
        l.remove(2); // not in it any more: nothing
        assert_eq!(l.iter().collect::<Vec<_>>(), vec![1, 3, 4]);
        assert_eq!(l.iter().rev().collect::<Vec<_>>(), vec![4, 3, 1]);
        assert_eq!((l.front(), l.next_of(1), l.next_of(4), l.next_of(0)), (Some(1), Some(3), None, None));
        l.remove(4);
        l.push_back(5);
        assert_eq!(l.iter().collect::<Vec<_>>(), vec![1, 3, 5]);
        for n in [1, 3, 5] {
            assert_eq!(l.front(), Some(n));
            l.remove(n);
        }
        assert_eq!((l.front(), l.iter().next()), (None, None));
    }

    #[test]
    fn an_attempt_moved_to_the_back_is_the_newest_and_the_rest_keep_their_order() {
        let mut l = list(4);
        l.move_to_back(0);
        assert_eq!(l.iter().collect::<Vec<_>>(), vec![1, 2, 3, 0]);
        assert_eq!(l.iter().rev().collect::<Vec<_>>(), vec![0, 3, 2, 1]);
        l.move_to_back(2);
        l.move_to_back(2); // already the newest: nothing
        assert_eq!(l.iter().collect::<Vec<_>>(), vec![1, 3, 0, 2]);
        l.remove(3);
        l.move_to_back(3); // not in flight: nothing
        l.push_back(4);
        assert_eq!(l.iter().collect::<Vec<_>>(), vec![1, 0, 2, 4]);
        assert_eq!((l.front(), l.next_of(2), l.next_of(4)), (Some(1), Some(4), None));
        let mut one = list(1);
        one.move_to_back(0);
        assert_eq!((one.front(), one.iter().collect::<Vec<_>>()), (Some(0), vec![0]));
    }

    #[test]
    fn a_walk_from_both_ends_stops_where_they_meet() {
        let l = list(4);
        let mut walk = l.iter();
        assert_eq!(
            (walk.next(), walk.next_back(), walk.next(), walk.next_back()),
            (Some(0), Some(3), Some(1), Some(2))
        );
        assert_eq!((walk.next(), walk.next_back()), (None, None));
    }
}
