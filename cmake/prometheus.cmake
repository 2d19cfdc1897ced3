# quota::prometheus (include/quota/prometheus.h): Engine::metrics() as prometheus-cpp
# collectables. AUTO builds it when prometheus-cpp (prometheus-cpp-dev: core and pull) is
# found, ON fails when it is missing, OFF leaves it out. It links prometheus-cpp's pull too,
# so that a program linking quota::prometheus can serve /metrics (prometheus::Exposer).
set(QUOTA_PROMETHEUS AUTO CACHE STRING "quota::prometheus: AUTO (when prometheus-cpp is found), ON or OFF")
set_property(CACHE QUOTA_PROMETHEUS PROPERTY STRINGS AUTO ON OFF)
string(TOUPPER "${QUOTA_PROMETHEUS}" quota_prometheus_value)
if(NOT quota_prometheus_value MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "QUOTA_PROMETHEUS is '${QUOTA_PROMETHEUS}': give AUTO, ON or OFF")
endif()
set(QUOTA_HAS_PROMETHEUS OFF)
if(NOT quota_prometheus_value STREQUAL "OFF")
  find_package(prometheus-cpp CONFIG QUIET)
  if(TARGET prometheus-cpp::core AND TARGET prometheus-cpp::pull)
    set(QUOTA_HAS_PROMETHEUS ON)
  elseif(quota_prometheus_value STREQUAL "ON")
    message(FATAL_ERROR "QUOTA_PROMETHEUS=ON but prometheus-cpp (core and pull) was not found: "
                        "install prometheus-cpp-dev, or configure with -DQUOTA_PROMETHEUS=OFF")
  endif()
endif()
if(QUOTA_HAS_PROMETHEUS)
  add_library(quota_prometheus src/prometheus/collector.cpp)
  add_library(quota::prometheus ALIAS quota_prometheus)
  # Installed as quota::prometheus too (cmake/install.cmake: the component "prometheus").
  set_target_properties(quota_prometheus PROPERTIES EXPORT_NAME prometheus)
  target_link_libraries(quota_prometheus PUBLIC quota::quota prometheus-cpp::core
                                                prometheus-cpp::pull)
  quota_target_options(quota_prometheus)
  message(STATUS "quota: quota::prometheus built")
else()
  message(STATUS "quota: quota::prometheus not built (no prometheus-cpp)")
endif()
