rule report:
    input:
        sts=lambda w: run_dirs(w.suite, "sts.json"),
    output:
        md=f"{RESULTS}/{{suite}}/tables/sts.md",
        csv=f"{RESULTS}/{{suite}}/tables/sts.csv",
    log:
        f"{RESULTS}/{{suite}}/logs/report.log",
    shell:
        "csebench report --suite {wildcards.suite} --sts {input.sts} --out-dir $(dirname {output.md}) 2> {log}"
