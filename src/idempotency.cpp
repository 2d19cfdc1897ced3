#include "idempotency.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "quota/error.h"
#include "quota/limit.h"

namespace quota::detail {

}  // namespace quota::detail

namespace quota::detail {

std::string request_text(std::string_view operation, std::int64_t cost) {
  return fmt::format("{} {}", operation, cost);
}

std::string request_text(const std::vector<Charge>& charges, std::int64_t cost) {
  std::vector<std::string> places;
  places.reserve(charges.size());
  // A limit's own cost, where it differs from the call's, as "limit=cost" ('=' is in no name).
  for (const Charge& charge : charges) {
    const std::int64_t own = charge.cost.value_or(cost);
    places.push_back(own == cost ? fmt::format("{}:{}", charge.limit, charge.owner)
                                 : fmt::format("{}={}:{}", charge.limit, own, charge.owner));
  }
  std::sort(places.begin(), places.end());
  return fmt::format("consume_all {} {}", cost, fmt::join(places, ","));
}

std::optional<StoredAnswer> find_answer(Store& store, const KeyPlace& place, std::string_view key,
                                        std::int64_t now) {
  const std::vector<Row> rows = store.query(
      kFindKey, {Value(std::string(place.limit)), Value(std::string(place.owner)),
                 Value(std::string(key)), Value(now)});
  if (rows.empty()) return std::nullopt;
  const Row& row = rows.front();
  StoredAnswer found;
  found.request = text_of(row.at(0));
  found.decided_by = text_of(row.at(1));
  found.result = result_of(row, 2);
  if (!is_null(row.at(9))) {
    found.leases.push_back({std::string(place.limit), std::string(place.owner), text_of(row.at(9)),
                            integer_of(row.at(10))});
  }
  return found;
}

StoredAnswer replay(Store& store, const std::vector<KeyPlace>& places, StoredAnswer found,
                    const std::string& request, std::string_view key, std::int64_t now) {
  if (found.request != request) {
    throw Error(ErrorCode::idempotency_conflict,
                fmt::format("the idempotency key {} was used for another request ({}), not for "
                            "this one ({}): use a new key for a new request",
                            bounded(key), found.request, request));
  }
  found.result.replayed = true;
  if (places.size() > 1) {
    // consume_all: each place's row holds that place's lease.
    found.leases.clear();
    for (const KeyPlace& place : places) {
      if (auto row = find_answer(store, place, key, now)) {
        for (LeaseGrant& lease : row->leases) found.leases.push_back(std::move(lease));
      }
    }
  }
  return found;
}

std::optional<StoredAnswer> find_replay(Store& store, const std::vector<KeyPlace>& places,
                                        std::string_view key, const std::string& request,
                                        std::int64_t now) {
  for (const KeyPlace& place : places) {
    if (auto found = find_answer(store, place, key, now)) {
      return replay(store, places, std::move(*found), request, key, now);
    }
  }
  return std::nullopt;
}

bool claim(Store& store, const KeyPlace& place, std::string_view key, const std::string& request,
           std::int64_t now, std::int64_t ttl_ms) {
  return store.execute(kClaimKey, {Value(std::string(place.limit)), Value(std::string(place.owner)),
                                   Value(std::string(key)), Value(request), Value(now + ttl_ms),
                                   Value(now)}) > 0;
}

void store_answer(Store& store, const KeyPlace& place, std::string_view key,
                  const StoredAnswer& answer) {
  const Result& result = answer.result;
  const auto lease = std::find_if(answer.leases.begin(), answer.leases.end(), [&](const LeaseGrant& held) {
    return held.limit == place.limit && held.owner == place.owner;
  });
  const bool held = lease != answer.leases.end();
  store.execute(kStoreAnswer,
                {Value(std::string(place.limit)), Value(std::string(place.owner)),
                 Value(std::string(key)),
                 answer.decided_by.empty() ? Value() : Value(answer.decided_by),
                 Value(std::int64_t{result.allowed}), Value(std::string(to_string(result.reason))),
                 Value(result.remaining), Value(result.retry_after_ms), Value(result.reset_at_ms),
                 Value(result.denied), Value(std::int64_t{result.shadow_denied}),
                 held ? Value(lease->lease) : Value(), held ? Value(lease->expires_at_ms) : Value()});
}

}  // namespace quota::detail
