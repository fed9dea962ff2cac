//! Work shared out over the machine's cores, for reads that are many and independent.

/// `f` of each of `items`, in order, computed on as many threads as the machine has
/// cores (on this thread alone when it has one, or when there are fewer than
/// `serial_below` items, where threads would cost more than they save); the items of
/// a thread that panicked get `fallback` of them, so a caller always gets one answer
/// per item.
pub fn on_every_core<T: Sync, R: Send>(
    items: &[T],
    serial_below: usize,
    f: impl Fn(&T) -> R + Sync,
    fallback: impl Fn(&T) -> R,
) -> Vec<R> {
    let threads = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    if threads < 2 || items.len() < serial_below.max(2) {
        return items.iter().map(&f).collect();
    }
    let size = items.len().div_ceil(threads);
    let f = &f;
    std::thread::scope(|scope| {
        let parts: Vec<_> = items
            .chunks(size)
            .map(|chunk| {
                let handle = scope.spawn(move || chunk.iter().map(f).collect::<Vec<R>>());
                (chunk, handle)
            })
            .collect();
        parts
            .into_iter()
            .flat_map(|(chunk, handle)| {
                handle
                    .join()
                    .unwrap_or_else(|_| chunk.iter().map(&fallback).collect())
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::on_every_core;

    #[test]
    fn every_item_is_answered_in_order_and_a_panicking_thread_gets_the_fallback() {
        let items: Vec<u32> = (0..200).collect();
        let doubled = on_every_core(&items, 2, |i| i * 2, |_| 0);
        assert_eq!(doubled, items.iter().map(|i| i * 2).collect::<Vec<_>>());
        // On one core the work runs on this thread, where a panic is the caller's.
        if std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get) < 2 {
            return;
        }
        let answers = on_every_core(
            &items,
            2,
            |i| {
                assert!(*i != 7, "a thread fails");
                Some(*i)
            },
            |_| None,
        );
        assert_eq!(answers.len(), items.len());
        assert_eq!(answers[7], None);
        assert_eq!(answers[199], Some(199));
    }
}
