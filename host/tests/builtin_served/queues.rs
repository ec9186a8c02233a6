//! The queue recipe.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_4_producers_4_consumers_every_item_taken_exactly_once() {
    let s = Served::start(&["queue"]);
    let hosts = s.hosts();
    let claimed = Arc::new(AtomicUsize::new(0));
    let taken = Arc::new(Mutex::new(Vec::<String>::new()));
    let mut tasks = Vec::new();
    // Consumers first, so some wait on an empty queue.
    for _ in 0..4 {
        let c = connect(&hosts).await;
        let claimed = claimed.clone();
        let taken = taken.clone();
        tasks.push(tokio::spawn(async move {
            let q = Queue::new(&c, "/queues/work");
            // Take until 100 takes have been started in total (a take
            // waiting on an empty queue cannot be cancelled server-side).
            while claimed.fetch_add(1, Ordering::SeqCst) < 100 {
                let item = q.take().await.expect("take");
                taken.lock().unwrap().push(String::from_utf8(item).unwrap());
            }
        }));
    }
    for p in 0..4 {
        let c = connect(&hosts).await;
        tasks.push(tokio::spawn(async move {
            let q = Queue::new(&c, "/queues/work");
            for i in 0..25 {
                q.put(format!("p{p}-{i:02}").as_bytes()).await.expect("put");
            }
        }));
    }
    within("100 puts and takes", Duration::from_secs(40), async {
        for t in tasks {
            t.await.expect("task");
        }
    })
    .await;
    let mut got = taken.lock().unwrap().clone();
    got.sort();
    let mut want: Vec<String> = (0..4)
        .flat_map(|p| (0..25).map(move |i| format!("p{p}-{i:02}")))
        .collect();
    want.sort();
    assert_eq!(got.len(), 100, "items taken");
    assert_eq!(got, want, "every item exactly once");
    let c = connect(&hosts).await;
    assert_eq!(Queue::new(&c, "/queues/work").len().await.unwrap(), 0);
    assert_eq!(pending_waits(&c).await, 0);

    // Priority order: lower priority first, FIFO within a priority.
    let pq = PriorityQueue::new(&c, "/queues/prio");
    for (data, prio) in [
        ("e", 500u16),
        ("b", 3),
        ("g", 999),
        ("c", 3),
        ("d", 100),
        ("a", 0),
        ("f", 500),
    ] {
        pq.put(data.as_bytes(), prio).await.unwrap();
    }
    let mut order = String::new();
    for _ in 0..7 {
        order.push_str(&String::from_utf8(pq.take().await.unwrap()).unwrap());
    }
    assert_eq!(order, "abcdefg");
    assert!(pq.is_empty().await.unwrap());
}
