//! Devices: TensorFlow's device names (`/job:localhost/replica:0/task:0/device:CPU:0`), their
//! parsing (full, legacy `/cpu:0`, local `CPU:0`, partial specifications), and the devices a
//! session has. A device is a trait object so a GPU device can stand behind the same interface.
use std::fmt;

/// A device name, each component optional (a partial specification such as `/device:CPU:*`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct DeviceName {
    /// `/job:<name>`.
    pub job: Option<String>,
    /// `/replica:<n>`.
    pub replica: Option<u32>,
    /// `/task:<n>`.
    pub task: Option<u32>,
    /// The device type, case-sensitive (`CPU`, `GPU`); legacy `/cpu:`/`/gpu:` normalize.
    pub device_type: Option<String>,
    /// The device index.
    pub id: Option<u32>,
}

/// A device name that does not parse, or a request no device satisfies.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("device '{name}': {reason}")]
pub struct DeviceError {
    /// The name as given.
    pub name: String,
    /// What is wrong.
    pub reason: String,
}

/// The one device a session runs on without partitioning.
pub(crate) const CPU0: &str = "/job:localhost/replica:0/task:0/device:CPU:0";

/// The task of a device name (`/job:worker/replica:0/task:1/device:CPU:0` → 1; 0 if none).
pub(crate) fn task_of(device: &str) -> usize {
    DeviceName::parse(device).ok().and_then(|d| d.task).unwrap_or(0) as usize
}

fn is_name(s: &str) -> bool {
    let mut c = s.chars();
    c.next().is_some_and(|f| f.is_ascii_alphabetic()) && c.all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
}

impl DeviceName {
    /// Parses a full or partial name: `/job:j/replica:r/task:t/device:TYPE:id` in any order,
    /// each part optional, `*` for "any"; legacy `/cpu:0`, `/gpu:1`; an empty string or `/`
    /// is the empty specification. Also accepts the local form `CPU:0`.
    pub fn parse(name: &str) -> Result<DeviceName, DeviceError> {
        let bad = |reason: &str| DeviceError { name: name.to_string(), reason: reason.to_string() };
        let mut d = DeviceName::default();
        if name.is_empty() || name == "/" {
            return Ok(d);
        }
        if !name.starts_with('/') {
            let (ty, id) = name.split_once(':').ok_or_else(|| bad("expected /job:.../device:TYPE:N or TYPE:N"))?;
            if !is_name(ty) {
                return Err(bad("bad device type"));
            }
            d.device_type = Some(ty.to_string());
            d.id = if id == "*" { None } else { Some(id.parse().map_err(|_| bad("bad device index"))?) };
            return Ok(d);
        }
        let parts: Vec<&str> = name[1..].split('/').collect();
        let mut i = 0;
        let num = |s: &str, what: &str| -> Result<Option<u32>, DeviceError> {
            if s == "*" {
                Ok(None)
            } else {
                s.parse().map(Some).map_err(|_| bad(&format!("bad {what} '{s}'")))
            }
        };
        while i < parts.len() {
            let p = parts[i];
            let (key, value) = p.split_once(':').ok_or_else(|| bad(&format!("bad component '{p}'")))?;
            match key {
                "job" if value == "*" => d.job = None,
                "job" if is_name(value) => d.job = Some(value.to_string()),
                "replica" => d.replica = num(value, "replica")?,
                "task" => d.task = num(value, "task")?,
                "device" => {
                    let (ty, id) = match value.split_once(':') {
                        Some((t, i)) => (t, Some(i)),
                        None => (value, None),
                    };
                    d.device_type = match ty {
                        "*" => None,
                        t if is_name(t) => Some(t.to_string()),
                        _ => return Err(bad(&format!("bad device type '{ty}'"))),
                    };
                    d.id = match id {
                        Some(i) => num(i, "device index")?,
                        None => None,
                    };
                }
                "cpu" | "CPU" | "gpu" | "GPU" => {
                    d.device_type = Some(key.to_ascii_uppercase());
                    d.id = num(value, "device index")?;
                }
                _ => return Err(bad(&format!("unknown component '{p}'"))),
            }
            i += 1;
        }
        Ok(d)
    }

    /// A fully specified name.
    pub fn full(job: &str, replica: u32, task: u32, device_type: &str, id: u32) -> DeviceName {
        DeviceName {
            job: Some(job.into()),
            replica: Some(replica),
            task: Some(task),
            device_type: Some(device_type.into()),
            id: Some(id),
        }
    }

    /// True if every component `spec` sets equals this name's.
    pub fn matches(&self, spec: &DeviceName) -> bool {
        (spec.job.is_none() || spec.job == self.job)
            && (spec.replica.is_none() || spec.replica == self.replica)
            && (spec.task.is_none() || spec.task == self.task)
            && (spec.device_type.is_none() || spec.device_type == self.device_type)
            && (spec.id.is_none() || spec.id == self.id)
    }

    /// True if some device could match both specifications.
    pub fn is_compatible_with(&self, other: &DeviceName) -> bool {
        fn ok<T: PartialEq>(a: &Option<T>, b: &Option<T>) -> bool {
            a.is_none() || b.is_none() || a == b
        }
        ok(&self.job, &other.job)
            && ok(&self.replica, &other.replica)
            && ok(&self.task, &other.task)
            && ok(&self.device_type, &other.device_type)
            && ok(&self.id, &other.id)
    }

    /// The components both set, merged (`None` if they conflict).
    pub fn merge(&self, other: &DeviceName) -> Option<DeviceName> {
        if !self.is_compatible_with(other) {
            return None;
        }
        Some(DeviceName {
            job: self.job.clone().or_else(|| other.job.clone()),
            replica: self.replica.or(other.replica),
            task: self.task.or(other.task),
            device_type: self.device_type.clone().or_else(|| other.device_type.clone()),
            id: self.id.or(other.id),
        })
    }
}

impl fmt::Display for DeviceName {
    /// TensorFlow's canonical form of the components that are set.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(j) = &self.job {
            write!(f, "/job:{j}")?;
        }
        if let Some(r) = self.replica {
            write!(f, "/replica:{r}")?;
        }
        if let Some(t) = self.task {
            write!(f, "/task:{t}")?;
        }
        match (&self.device_type, self.id) {
            (Some(ty), Some(id)) => write!(f, "/device:{ty}:{id}"),
            (Some(ty), None) => write!(f, "/device:{ty}:*"),
            (None, Some(id)) => write!(f, "/device:*:{id}"),
            (None, None) => Ok(()),
        }
    }
}

/// A device kernels run on.
pub trait Device: Send + Sync + fmt::Debug {
    /// The full name, e.g. `/job:localhost/replica:0/task:0/device:CPU:0`.
    fn name(&self) -> &DeviceName;
    /// The device type (`CPU`).
    fn device_type(&self) -> &str;
    /// A number that changes each time the device is created (TensorFlow's
    /// `send_device_incarnation`).
    fn incarnation(&self) -> u64;
}

/// A CPU device.
#[derive(Debug)]
pub struct CpuDevice {
    name: DeviceName,
    incarnation: u64,
}

impl Device for CpuDevice {
    fn name(&self) -> &DeviceName {
        &self.name
    }
    fn device_type(&self) -> &str {
        "CPU"
    }
    fn incarnation(&self) -> u64 {
        self.incarnation
    }
}

/// The devices of a session, in priority order.
#[derive(Debug)]
pub struct DeviceSet {
    devices: Vec<Box<dyn Device>>,
}

impl DeviceSet {
    /// `count` CPU devices `/job:localhost/replica:0/task:0/device:CPU:0..count`.
    pub fn cpus(count: usize) -> DeviceSet {
        let seed =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64);
        let devices = (0..count.max(1))
            .map(|i| {
                let incarnation = (seed ^ (i as u64 + 1)).wrapping_mul(0x9E37_79B9_7F4A_7C15).max(1);
                Box::new(CpuDevice { name: DeviceName::full("localhost", 0, 0, "CPU", i as u32), incarnation })
                    as Box<dyn Device>
            })
            .collect();
        DeviceSet { devices }
    }

    /// One CPU device per task of a cluster, `/job:worker/replica:0/task:0..tasks/device:CPU:0`
    /// (MPI rank r is task r). Incarnations come from the task number, so every rank builds
    /// the same partitions (the transfer nodes' `send_device_incarnation` included).
    pub fn workers(tasks: usize) -> DeviceSet {
        let devices = (0..tasks.max(1))
            .map(|t| {
                let incarnation = (t as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15).max(1);
                Box::new(CpuDevice { name: DeviceName::full("worker", 0, t as u32, "CPU", 0), incarnation })
                    as Box<dyn Device>
            })
            .collect();
        DeviceSet { devices }
    }

    /// All devices.
    pub fn devices(&self) -> &[Box<dyn Device>] {
        &self.devices
    }

    /// The first device matching a specification.
    pub fn find(&self, spec: &DeviceName) -> Option<&dyn Device> {
        self.devices.iter().find(|d| d.name().matches(spec)).map(|d| d.as_ref())
    }

    /// The names of all devices, for error messages.
    pub fn names(&self) -> String {
        self.devices.iter().map(|d| d.name().to_string()).collect::<Vec<_>>().join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> DeviceName {
        DeviceName::parse(s).unwrap()
    }

    #[test]
    fn parses_tensorflows_forms() {
        let full = p("/job:localhost/replica:0/task:0/device:CPU:0");
        assert_eq!(full, DeviceName::full("localhost", 0, 0, "CPU", 0));
        assert_eq!(full.to_string(), "/job:localhost/replica:0/task:0/device:CPU:0");
        assert_eq!(p("/cpu:0"), DeviceName { device_type: Some("CPU".into()), id: Some(0), ..Default::default() });
        assert_eq!(p("/device:GPU:1").to_string(), "/device:GPU:1");
        assert_eq!(p("/job:worker/gpu:3").job.as_deref(), Some("worker"));
        assert_eq!(p("/device:gpu:1").device_type.as_deref(), Some("gpu"), "only legacy forms normalize");
        let any = p("/job:ps/replica:0/task:1/device:CPU:*");
        assert_eq!((any.task, any.id), (Some(1), None));
        assert_eq!(p("CPU:1").id, Some(1));
        assert_eq!(p(""), DeviceName::default());
        assert_eq!(p("/"), DeviceName::default());
        for bad in ["/job:", "/foo:1", "/device:CPU:x", "/replica:-1", "cpu", "/job:1abc", "//"] {
            assert!(DeviceName::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn matching_and_merging() {
        let set = DeviceSet::cpus(2);
        assert_eq!(set.devices().len(), 2);
        assert_eq!(set.find(&p("/cpu:1")).unwrap().name().to_string(), "/job:localhost/replica:0/task:0/device:CPU:1");
        assert_eq!(set.find(&p("/device:CPU:*")).unwrap().name().id, Some(0));
        assert!(set.find(&p("/gpu:0")).is_none());
        assert!(set.find(&p("/job:worker")).is_none());
        assert!(p("/cpu:0").is_compatible_with(&p("/job:localhost")));
        assert!(!p("/cpu:0").is_compatible_with(&p("/cpu:1")));
        assert_eq!(p("/cpu:0").merge(&p("/job:localhost")).unwrap().to_string(), "/job:localhost/device:CPU:0");
        assert_ne!(set.devices()[0].incarnation(), set.devices()[1].incarnation());
    }
}
