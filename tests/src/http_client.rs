//! HTTP clients: ureq calls, Prometheus text, and a prober that asks while a test does something else.

use std::time::{Duration, Instant};

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into()
}

/// In a Prometheus text exposition: the sum of `name`'s series whose label text contains
/// every `labels` entry.
pub fn metric_in(text: &str, name: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| {
            l.split([' ', '{']).next() == Some(name) && labels.iter().all(|x| l.contains(x))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// GET → (status, body text).
pub fn http_get(url: &str, headers: &[(&str, &str)]) -> Result<(u16, String), String> {
    let mut req = agent().get(url);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = req.call().map_err(|e| e.to_string())?;
    let status = resp.status().as_u16();
    let body = resp
        .into_body()
        .read_to_string()
        .map_err(|e| e.to_string())?;
    Ok((status, body))
}

/// Any method with an optional body → (status, body text).
pub fn http_call(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> Result<(u16, String), String> {
    let mut req = ureq::http::Request::builder().method(method).uri(url);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req
        .body(body.map(<[u8]>::to_vec).unwrap_or_default())
        .map_err(|e| e.to_string())?;
    let resp = agent().run(req).map_err(|e| e.to_string())?;
    let status = resp.status().as_u16();
    let body = resp
        .into_body()
        .read_to_string()
        .map_err(|e| e.to_string())?;
    Ok((status, body))
}

/// POST → (status, body text).
pub fn http_post(
    url: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Result<(u16, String), String> {
    let mut req = agent().post(url);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = req.send(body).map_err(|e| e.to_string())?;
    let status = resp.status().as_u16();
    let body = resp
        .into_body()
        .read_to_string()
        .map_err(|e| e.to_string())?;
    Ok((status, body))
}

/// GETs a URL every 200 ms on its own thread while a test does something else: is the seed
/// still serving meanwhile?
pub struct Prober {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<Vec<(Result<u16, String>, Duration)>>,
}

impl Prober {
    pub fn start(url: String) -> Self {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut answers = Vec::new();
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                let started = Instant::now();
                let status = http_get(&url, &[]).map(|(s, _)| s);
                answers.push((status, started.elapsed()));
                std::thread::sleep(Duration::from_millis(200));
            }
            answers
        });
        Prober { stop, thread }
    }

    /// Stops and asserts that there was an answer and every answer was 200 within `within`.
    pub fn assert_all_ok(self, within: Duration) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let answers = self.thread.join().unwrap();
        assert!(!answers.is_empty());
        for (status, took) in &answers {
            assert_eq!(status.as_ref().ok(), Some(&200), "{answers:?}");
            assert!(*took < within, "{answers:?}");
        }
    }
}
