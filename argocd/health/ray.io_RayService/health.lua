-- Argo CD health of a RayService (ray.io/v1), from the conditions KubeRay writes: ray-project/kuberay v1.7.0,
-- ray-operator/apis/ray/v1/rayservice_types.go (RayServiceStatuses 133-162: conditions, numServeEndpoints, the
-- deprecated serviceStatus; condition types 210-222: Ready, UpgradeInProgress, RollbackInProgress, Suspending,
-- Suspended; reasons 224-238), ray-operator/controllers/ray/rayservice_controller.go (Reconcile: Ready False
-- ValidationFailed with the validation error 156-171; a RayService past its initializing timeout is a terminal
-- failure, recreated only by hand 184-195; handleSuspend 383-464: Suspending ("RayService is suspending."), then
-- Suspended ("RayService is suspended.") once every owned resource is deleted, and back to Ready False Initializing
-- when spec.suspend turns false; calculateConditions 785-818: Ready True NonZeroServeEndpoints, Ready False
-- ZeroServeEndpoints ("Number of serve endpoints dropped to 0") once it served, UpgradeInProgress True while an active
-- and a pending RayCluster both exist; isInitializingTimeout 2215-2225 and markFailedOnInitializingTimeout 2227-2275:
-- Ready False InitializingTimeout).
-- A RayService serves and does not finish: Healthy while Ready, Progressing while it initializes or upgrades or rolls
-- back, Degraded when it fails validation, times out initializing or drops to zero serve endpoints, Suspended when
-- suspended.
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

local ready = condition("Ready")
if is_true("Suspended") then
  return {status = "Suspended", message = said(ready, "RayService is suspended.")}
end
if is_true("Suspending") then
  return {status = "Suspended", message = said(ready, "RayService is suspending.")}
end
if ready == nil then
  return {status = "Progressing", message = "Waiting for KubeRay to report the RayService's status"}
end
if ready.status ~= "True" then
  if ready.reason == "ValidationFailed" or ready.reason == "InitializingTimeout" or
     ready.reason == "ZeroServeEndpoints" then
    return {status = "Degraded", message = said(ready, "RayService is not ready")}
  end
  return {status = "Progressing", message = said(ready, "RayService is not ready")}
end
for _, ctype in ipairs({"RollbackInProgress", "UpgradeInProgress"}) do
  if is_true(ctype) then
    return {status = "Progressing", message = ctype .. ": " .. said(condition(ctype), "")}
  end
end
return {status = "Healthy", message = said(ready, "RayService is ready") .. " (" ..
                                      tostring(st.numServeEndpoints or 0) .. " serve endpoints)"}
