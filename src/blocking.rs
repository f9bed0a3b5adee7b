//! Short blocking work (a bounded commit) from async code. On the multi-thread runtime it
//! runs in place (`block_in_place`: `f` runs on this thread and the task goes on here, though
//! tokio wakes, or starts, a thread to take the worker's other tasks each call); on any other
//! runtime (a headless run's current-thread one) it goes to the blocking pool. Work of a few
//! syscalls is cheaper done right on the worker (see `persist::append_many`,
//! `protect::Guard::finish_async`).

/// Runs `f` in place on the multi-thread runtime, else on the blocking pool.
pub async fn in_place<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, tokio::task::JoinError> {
    let multi = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if multi {
        return Ok(tokio::task::block_in_place(f));
    }
    tokio::task::spawn_blocking(f).await
}

#[cfg(test)]
mod tests {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn runs_on_the_calling_thread_on_the_multi_thread_runtime() {
        let here = std::thread::current().id();
        let there = super::in_place(|| std::thread::current().id())
            .await
            .unwrap();
        assert_eq!(here, there);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn goes_to_the_blocking_pool_on_a_current_thread_runtime() {
        let here = std::thread::current().id();
        let there = super::in_place(|| std::thread::current().id())
            .await
            .unwrap();
        assert_ne!(here, there);
    }
}
