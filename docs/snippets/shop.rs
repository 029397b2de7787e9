use std::time::Duration;
use parsley::{App, Parsley, Stage, Step, Topic, Utf8, I64};

pub struct Shop {
    pub views: Topic<String, i64>,
    pub regional: Topic<String, i64>,
    pub devices: Topic<String, i64>,
    pub reports: Topic<String, i64>,
    pub app: App,
}

pub fn shop() -> Shop {
    let topic = |name: &str| Topic::<String, i64>::with_codecs(name, Utf8, I64);
    let (views, regional, devices, reports) =
        (topic("views"), topic("regional"), topic("devices"), topic("reports"));
    let geo = Stage::named("geo")
        .on(&views, { let out = regional.clone();
            move |view| vec![out.send(view.key().cloned(), view.value() * 10)] })
        .into(&regional)
        .build();
    let device = Stage::named("device")
        .state(I64, || 0i64)
        .on(&views, { let out = devices.clone();
            move |seen: i64, view| Step::of(seen + 1).emit(out.send(view.key().cloned(), seen + 1)) })
        .into(&devices)
        .build();
    let report = Stage::named("report")
        .state(I64, || 0i64)
        .on(&regional, |total: i64, record| Step::of(total + record.value()))
        .on(&devices, |total: i64, record| Step::of(total + record.value()))
        .tick_fold(Duration::from_secs(60), { let out = reports.clone();
            move |ticks: i64, _tick| Step::of(ticks + 1).emit(out.send(None, ticks + 1)) })
        .into(&reports)
        .build();
    let app = Parsley::named("shop").stage(geo).stage(device).stage(report).build().unwrap();
    Shop { views, regional, devices, reports, app }
}
