import type { JobName, JobPayload } from "../../app/server/platform/jobs.server.ts";
import { backupAgent } from "./backup-agent.ts";
import { cloneAgentJob } from "./clone-agent.ts";
import type { JobContext } from "./context.ts";
import { deliverWebhook } from "./deliver-webhook.ts";
import { drainNodeJob } from "./drain-node.ts";
import { fillPoolJob } from "./fill-pool.ts";
import { instanceAction } from "./instance-action.ts";
import { processPaymentEvent } from "./process-payment-event.ts";
import { provisionInstance } from "./provision-instance.ts";
import { purgeAuditLog } from "./purge-audit-log.ts";
import { reconcile } from "./reconcile.ts";
import { recoverNodeJob } from "./recover-node.ts";
import { refreshModelCatalog } from "./refresh-model-catalog.ts";
import { removeSkillFolder } from "./remove-skill-folder.ts";
import { restartInstanceJob } from "./restart-instance.ts";
import { restoreBackupJob } from "./restore-backup.ts";
import { sampleStorageJob } from "./sample-storage.ts";
import { scheduledBackupsJob } from "./scheduled-backups.ts";
import { sendEmail } from "./send-email.ts";
import { sleepIdleInstancesJob } from "./sleep-idle-instances.ts";
import { stopUnpaidInstance } from "./stop-unpaid-instance.ts";
import { sweepControlUiDevicesJob } from "./sweep-control-ui-devices.ts";
import { sweepCreditHoldsJob } from "./sweep-credit-holds.ts";
import { sweepGatewayTmpJob } from "./sweep-gateway-tmp.ts";
import { syncAgentsJob } from "./sync-agents.ts";
import { teardownInstance } from "./teardown-instance.ts";
import { updateImageJob } from "./update-image.ts";
import { wakeInstanceJob } from "./wake-instance.ts";
import { warmUpInstance } from "./warm-up-instance.ts";

type Handlers = { [N in JobName]: (payload: JobPayload<N>, ctx: JobContext) => Promise<unknown> };

/** Every job of the catalog has exactly one handler here (the type makes a missing one an error). */
export const handlers: Handlers = {
  "send-email": sendEmail,
  "refresh-model-catalog": refreshModelCatalog,
  "sweep-credit-holds": sweepCreditHoldsJob,
  "deliver-webhook": deliverWebhook,
  "teardown-instance": teardownInstance,
  "process-payment-event": processPaymentEvent,
  "provision-instance": provisionInstance,
  "update-image": updateImageJob,
  "instance-action": instanceAction,
  reconcile,
  "remove-skill-folder": removeSkillFolder,
  "fill-pool": fillPoolJob,
  "stop-unpaid-instance": stopUnpaidInstance,
  "sync-agents": syncAgentsJob,
  "warm-up-instance": warmUpInstance,
  "backup-agent": backupAgent,
  "restore-backup": restoreBackupJob,
  "clone-agent": cloneAgentJob,
  "scheduled-backups": scheduledBackupsJob,
  "purge-audit-log": purgeAuditLog,
  "drain-node": drainNodeJob,
  "recover-node": recoverNodeJob,
  "sleep-idle-instances": sleepIdleInstancesJob,
  "sweep-control-ui-devices": sweepControlUiDevicesJob,
  "wake-instance": wakeInstanceJob,
  "restart-instance": restartInstanceJob,
  "sample-storage": sampleStorageJob,
  "sweep-gateway-tmp": sweepGatewayTmpJob,
};
