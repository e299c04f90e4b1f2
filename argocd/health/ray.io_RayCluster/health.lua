-- Argo CD health of a RayCluster (ray.io/v1), from the status KubeRay writes: ray-project/kuberay v1.7.0,
-- ray-operator/apis/ray/v1/raycluster_types.go (ClusterState 558-565: ready, suspended, and failed, deprecated and no
-- longer written; RayClusterStatus 568-639: state, readyWorkerReplicas, desiredWorkerReplicas, conditions; condition
-- types 641-665: RayClusterProvisioned, HeadPodReady, ReplicaFailure, RayClusterSuspending, RayClusterSuspended),
-- ray-operator/controllers/ray/raycluster_controller.go (calculateStatus 1970-2137: ReplicaFailure with the
-- reconcile error as its message when a Pod cannot be created or deleted, removed once a reconcile succeeds
-- 1981-1995; state ready once the head and every desired worker Pod run and are ready 2017-2022, never unset but by
-- a suspension; HeadPodReady from the head Pod's Ready condition 2024-2041; RayClusterProvisioned 2043-2062;
-- RayClusterSuspending, then RayClusterSuspended once no Pod is left 2064-2111; state suspended 2114-2116),
-- ray-operator/controllers/ray/utils/util.go (FindHeadPodReadyCondition 84-127, CheckAllPodsRunning 587-606),
-- ray-operator/controllers/ray/utils/constant.go (the ReplicaFailure reasons 401-425) and
-- ray-operator/pkg/features/features.go (RayClusterStatusConditions on by default, 106).
-- A RayCluster serves and does not finish: Healthy while it is ready and its head Pod is, Degraded on ReplicaFailure
-- (as Argo CD's own ReplicaSet check), Suspended when suspended, Progressing while its Pods start.
-- Argo CD runs it without Lua's string library (resource.customizations.useOpenLibs is not set): no string methods.
local st = obj.status or {}

local function condition(ctype)
  for _, c in ipairs(st.conditions or {}) do
    if c.type == ctype then
      return c
    end
  end
  return nil
end

local function is_true(ctype)
  local c = condition(ctype)
  return c ~= nil and c.status == "True"
end

local function said(c, default)
  if c ~= nil and c.message ~= nil and c.message ~= "" then
    return c.message
  end
  if c ~= nil and c.reason ~= nil and c.reason ~= "" then
    return c.reason
  end
  return default
end

local suspend = (obj.spec or {}).suspend == true
if is_true("RayClusterSuspended") or (st.state == "suspended" and suspend) then
  return {status = "Suspended", message = "RayCluster is suspended (spec.suspend): its Pods are deleted"}
end
if is_true("RayClusterSuspending") then
  return {status = "Suspended", message = "RayCluster is suspending (spec.suspend): deleting its Pods"}
end
if is_true("ReplicaFailure") then
  return {status = "Degraded", message = said(condition("ReplicaFailure"), "ReplicaFailure")}
end
local workers = tostring(st.readyWorkerReplicas or 0) .. " of " .. tostring(st.desiredWorkerReplicas or 0) ..
                " worker Pods ready"
local head = condition("HeadPodReady")
if head ~= nil and head.status ~= "True" and st.state == "ready" then
  return {status = "Progressing", message = "Head Pod not ready: " .. said(head, "Unknown")}
end
if st.state == "ready" then
  return {status = "Healthy", message = "RayCluster is ready (" .. workers .. ")"}
end
if obj.status == nil then
  return {status = "Progressing", message = "Waiting for KubeRay to report the RayCluster's status"}
end
return {status = "Progressing", message = said(condition("RayClusterProvisioned"), "RayCluster Pods are starting") ..
                                          " (" .. workers .. ")"}
