#!/usr/bin/env bash
# Downloads a dataset from its official source into ${DATA_DIR:-data}/, checks it and unpacks it where
# the workloads look by default (data/cifar-10-batches-bin, data/tiny-imagenet-200, data/cora). Needs
# internet access, curl, and unzip for tiny-imagenet-200. Re-running skips what is already there.
#
#   bash scripts/fetch_data.sh cifar10|tiny-imagenet-200|cora|citeseer
#
# The checksums are the ones the sources publish (MD5) and, where pinned, the archive's SHA-256; a
# mismatch deletes the download and fails. LINQS publishes no checksum for its citation graphs: those
# are checked against their published sizes (papers, citations, words per paper) instead.
set -euo pipefail
cd "$(dirname "$0")/.."
data_dir=${DATA_DIR:-data}
name=${1:-}

fetch() {  # URL FILE MD5 [SHA256]
  local url=$1 file=$2 md5=$3 sha256=${4:-}
  if [ ! -f "$file" ]; then
    echo "fetch_data: downloading $url"
    curl -fL --retry 3 -o "$file.part" "$url"
    mv "$file.part" "$file"
  fi
  if ! echo "$md5  $file" | md5sum -c --quiet -; then
    rm -f "$file"
    echo "fetch_data: $file does not have the published MD5 $md5; deleted it, run again" >&2
    exit 1
  fi
  if [ -n "$sha256" ] && ! echo "$sha256  $file" | sha256sum -c --quiet -; then
    rm -f "$file"
    echo "fetch_data: $file does not have the SHA-256 $sha256; deleted it, run again" >&2
    exit 1
  fi
  echo "fetch_data: $file checked (sha256 $(sha256sum "$file" | cut -d' ' -f1))"
}

mkdir -p "$data_dir"
case "$name" in
  cifar10)
    if [ -f "$data_dir/cifar-10-batches-bin/test_batch.bin" ]; then echo "fetch_data: $data_dir/cifar-10-batches-bin is there"; exit 0; fi
    fetch https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz "$data_dir/cifar-10-binary.tar.gz" \
      c32a1d4ab5d03f1284b67883e8d87530 c4a38c50a1bc5f3a1c5537f2155ab9d68f9f25eb1ed8d9ddda3db29a59bca1dd
    tar -xzf "$data_dir/cifar-10-binary.tar.gz" -C "$data_dir"
    echo "fetch_data: CIFAR-10 in $data_dir/cifar-10-batches-bin (dtrain --workload cifar10 finds it from here)"
    ;;
  tiny-imagenet-200)
    if [ -f "$data_dir/tiny-imagenet-200/wnids.txt" ]; then echo "fetch_data: $data_dir/tiny-imagenet-200 is there"; exit 0; fi
    command -v unzip >/dev/null || { echo "fetch_data: needs unzip (apt-get install unzip)" >&2; exit 1; }
    fetch http://cs231n.stanford.edu/tiny-imagenet-200.zip "$data_dir/tiny-imagenet-200.zip" 90528d7ca1a48142e341f4ef8d21d0de
    unzip -q "$data_dir/tiny-imagenet-200.zip" -d "$data_dir"
    echo "fetch_data: tiny-imagenet-200 in $data_dir/tiny-imagenet-200 (resnet18, resnet50 and alexnet find it from here)"
    ;;
  cora|citeseer)
    # LINQS's archives: NAME/NAME.content and NAME/NAME.cites, the format the gcn workload reads.
    case "$name" in
      cora) papers=2708 citations=5429 words=1433 ;;
      citeseer) papers=3312 citations=4732 words=3703 ;;
    esac
    dir="$data_dir/$name"
    if [ -f "$dir/$name.content" ]; then echo "fetch_data: $dir is there"; exit 0; fi
    archive="$data_dir/$name.tgz"
    if [ ! -f "$archive" ]; then
      echo "fetch_data: downloading https://linqs-data.soe.ucsc.edu/public/lbc/$name.tgz"
      curl -fL --retry 3 -o "$archive.part" "https://linqs-data.soe.ucsc.edu/public/lbc/$name.tgz"
      mv "$archive.part" "$archive"
    fi
    tar -xzf "$archive" -C "$data_dir"
    got_papers=$(grep -c . "$dir/$name.content" || true)
    got_citations=$(grep -c . "$dir/$name.cites" || true)
    got_words=$(head -n 1 "$dir/$name.content" | awk '{print NF - 2}')
    if [ "$got_papers" != "$papers" ] || [ "$got_citations" != "$citations" ] || [ "$got_words" != "$words" ]; then
      rm -rf "$dir" "$archive"
      echo "fetch_data: $archive holds $got_papers papers, $got_citations citations, $got_words words per paper;" \
           "LINQS publishes $papers, $citations and $words. Deleted it, run again" >&2
      exit 1
    fi
    echo "fetch_data: $dir checked ($papers papers, $citations citations, $words words; archive sha256 $(sha256sum "$archive" | cut -d' ' -f1))"
    echo "fetch_data: dtrain --workload gcn --data-dir $dir"
    ;;
  *)
    echo "usage: fetch_data.sh cifar10|tiny-imagenet-200|cora|citeseer   (into \${DATA_DIR:-data}/)" >&2
    exit 2
    ;;
esac
